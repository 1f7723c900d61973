"""miniformer: a decoder-only Transformer from its parts, and a study of what each part is for."""
