"""miniformer: a decoder-only Transformer from its parts, and a study of what each part is for.

The public API for a model handed on by `miniformer export RUN DIR`:

    import miniformer
    model, tokenizer = miniformer.load(DIR)
"""


def load(path):
    """A model exported by `miniformer export` and its tokenizer (see miniformer.stages.export.load)."""
    from miniformer.stages.export import load as _load

    return _load(path)
