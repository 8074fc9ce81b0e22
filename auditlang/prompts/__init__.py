"""Prompt layer: sandboxed Jinja templates, the template context, perturbations, sampling."""

from auditlang.prompts.context import build_context, item_context
from auditlang.prompts.fewshot import draw_fewshot, fewshot_for
from auditlang.prompts.perturb import (
    PERTURBATIONS,
    add_typo,
    apply_perturbation,
    insert_space,
    one_shot,
    shuffle_options,
)
from auditlang.prompts.render import (
    STDLIB_TEMPLATES_DIR,
    CompiledTemplate,
    TemplateError,
    TemplateNotFoundError,
    compile_stdlib_template,
    compile_template,
    letters,
    list_stdlib_templates,
    load_stdlib_template,
    options,
    template_hash,
)
from auditlang.prompts.sampling import sample_indices
from auditlang.prompts.seeds import seed_for

__all__ = [
    "PERTURBATIONS", "STDLIB_TEMPLATES_DIR", "CompiledTemplate", "TemplateError", "TemplateNotFoundError",
    "add_typo", "apply_perturbation", "build_context", "compile_stdlib_template", "compile_template",
    "draw_fewshot", "fewshot_for", "insert_space", "item_context", "letters", "list_stdlib_templates",
    "load_stdlib_template", "one_shot", "options", "sample_indices", "seed_for", "shuffle_options",
    "template_hash",
]
