"""Atlas ISA programs from Python: ``hologram.asm(text)``."""

from . import _native


class Program:
    """A validated Atlas ISA kernel. Parse errors raise ValidationError with line:column."""

    def __init__(self, text: str):
        self._p = text if isinstance(text, _native.Program) else _native.Program(text)

    @property
    def name(self) -> str:
        """Kernel name."""
        return self._p.name

    @property
    def params(self):
        """``[(name, 'buffer'|'scalar', dtype)]``."""
        return self._p.params

    @property
    def digest(self) -> str:
        """Canonical-form digest (keys kernel caches)."""
        return self._p.digest

    def text(self) -> str:
        """The program as ``.hasm`` text."""
        return self._p.text()

    def canonical(self) -> str:
        """The canonical form as ``.hasm`` text."""
        return self._p.canonical()

    def __repr__(self) -> str:
        return repr(self._p)


def asm(text: str) -> Program:
    """Parses and validates ``.hasm`` text.

    >>> import hologram as hg
    >>> p = hg.asm('.kernel k\\n.param .buf.f32 y .rw\\n    st.f32 y[%gid], 1.0;\\n')
    >>> p.name
    'k'
    """
    return Program(text)
