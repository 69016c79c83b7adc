"""``transformer_lens.hook_points``: ``HookPoint`` and ``HookedRootModule`` (a module whose hook points are
named by their paths once ``setup()`` is called)."""

from __future__ import annotations

from hooks import HookedModule, HookPoint

__all__ = ["HookPoint", "HookedRootModule"]


class HookedRootModule(HookedModule):
    """interp's :class:`hooks.HookedModule` under TransformerLens's name: call ``setup()`` at the end of
    ``__init__``; then ``run_with_hooks``, ``run_with_cache``, ``add_hook`` and ``reset_hooks`` work."""

    def setup(self) -> None:
        """Name every hook point below this module by its path."""
        self.setup_hooks()

    @property
    def mod_dict(self) -> dict:
        return dict(self.named_modules())
