"""miniformer: a decoder-only Transformer from its parts, and a study of what each part is for.

The public API for a model handed on by `miniformer export RUN DIR`:

    import miniformer
    model, tokenizer = miniformer.load(DIR)
    miniformer.export(model, DATA_DIR, OUT_DIR, name, train)   # an in-memory model (e.g. a LoRA merge) as an export
"""


def load(path):
    """A model exported by `miniformer export` and its tokenizer (see miniformer.stages.export.load)."""
    from miniformer.stages.export import load as _load

    return _load(path)


def export(model, data_dir, out, name, train, finetune=None):
    """An in-memory model as a Hugging Face model folder (see miniformer.stages.export.export_model)."""
    from miniformer.stages.export import export_model

    return export_model(model, data_dir, out, name, train, finetune)
