"""What every view offers: draw once from finished analysis objects, then update in place."""

from __future__ import annotations

from matplotlib.artist import Artist
from matplotlib.figure import Figure


class View:
    """A figure's artists, drawn once and then given new data by ``update``.

    Attributes
    ----------
    figure
        The figure drawn into.
    artists
        ``role -> artist``; ``update`` sets new data on these same objects and never draws,
        so a caller (the widget pump) calls ``figure.canvas.draw_idle()`` once per change.
    """

    figure: Figure
    artists: dict[str, Artist]

    def _keep(self, role: str, artist: Artist) -> Artist:
        """Register ``artist`` under ``role``, also its ``gid``, and return it."""
        if artist.get_gid() is None:
            artist.set_gid(role)
        self.artists[role] = artist
        return artist
