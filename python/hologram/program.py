"""Atlas ISA programs from Python: ``hologram.asm(text)``."""

from typing import Union

from . import _native


class Program:
    """A validated Atlas ISA kernel, from ``.hasm`` text (``str``, or ``bytes`` holding UTF-8).

    Any text that is not a valid program raises ValidationError saying where (line:column, or
    the byte offset of bytes that are not UTF-8): deep call chains, huge literals and other
    hostile input included, never a crash.
    """

    def __init__(self, text: Union[str, bytes]):
        self._p = text if isinstance(text, _native.Program) else _native.Program(text)

    @property
    def name(self) -> str:
        """Kernel name."""
        return self._p.name

    @property
    def params(self) -> list:
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


def asm(text: Union[str, bytes]) -> Program:
    """Parses and validates ``.hasm`` text (``str``, or UTF-8 ``bytes``); errors raise
    ValidationError with line:column.

    >>> import hologram as hg
    >>> p = hg.asm('.kernel k\\n.param .buf.f32 y .rw\\n    st.f32 y[%gid], 1.0;\\n')
    >>> p.name
    'k'
    """
    return Program(text)
