// The start form's choices: the tenant's agents, and the chosen agent's tools to ask about.
import { api, enc } from "./api.js";
import { el } from "./dom.js";

const $ = (id) => document.getElementById(id);

export async function loadAgents() {
  let names = ["default"];
  try {
    names = (await api("/v1/agents")).agents;
  } catch {
    /* the default agent still works */
  }
  $("start-agent").replaceChildren(...names.map((n) => el("option", { value: n }, n)));
  await loadTools();
}

// The agent's tools, offered as choices for "ask before running"; those the agent already
// asks about are shown ticked and fixed (a task can add approvals, not remove them).
export async function loadTools() {
  const agent = $("start-agent").value;
  let answer;
  try {
    answer = await api(`/v1/agents/${enc(agent)}/tools`);
  } catch {
    $("start-tools").replaceChildren(el("span", { class: "muted" }, "The agent's tools could not be listed."));
    return;
  }
  if (agent !== $("start-agent").value) return; // another agent was chosen meanwhile
  const choices = [...answer.tools, ...answer.toolsets.map((name) => ({ name, description: "every tool of this MCP server" }))];
  $("start-tools").replaceChildren(
    ...choices.map((t) => {
      const fixed = Boolean(t.approval);
      const box = el("input", {
        type: "checkbox",
        value: t.name,
        checked: fixed,
        disabled: fixed,
        dataset: { testid: "approve-tool", tool: t.name },
      });
      const why = t.approval === "always" ? "always asks" : t.approval ? `asks when ${t.approval}` : "";
      return el(
        "label",
        { class: `tool-choice${fixed ? " fixed" : ""}`, title: t.description || "" },
        box,
        el("code", {}, t.name),
        why ? el("small", { class: "muted" }, ` ${why}`) : null,
      );
    }),
  );
}
