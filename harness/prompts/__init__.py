"""Generation prompts: what a kernel generator (an LLM, a person) is told about one problem.

:func:`harness.prompts.render.render_prompt` renders one prompt from the
problem file, its workloads, the DSL's conventions and the rules the harness
enforces, optionally with the feedback of a previous attempt (status,
verdict, E_lib / U_roof, diagnostics) for generate-evaluate-refine loops.
"""
