"""One exception type for problems the user can fix; the CLI prints it as a single line and exits non-zero."""


class UserError(Exception):
    """Bad input (params, corpus, checkpoint, paths): the message names what is wrong and how to fix it."""
