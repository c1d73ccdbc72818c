"""tilefuse.Error: what the C++ library reports as a Status."""


class Error(Exception):
    """A model, input or device problem tilefuse reports (the CLI prints it and exits 2).

    ``str(error)`` is the text `tilefuse` prints after ``error: ``, e.g.
    ``not found: model 'x.onnx' does not exist``; ``code`` is its first part
    (``invalid argument``, ``unsupported``, ``not found``, ``out of resources``,
    ``internal error``).
    """

    def __init__(self, message: str, code: str = "invalid argument"):
        super().__init__(message)
        self.message = message
        self.code = code

    def __str__(self) -> str:
        return self.message
