"""Activities: model calls, tool execution, context assembly and artifact commits."""
