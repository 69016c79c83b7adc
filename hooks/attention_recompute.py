"""The forward that replaces an attention module's own while it is attached with an :class:`AttentionSpec`.

The first call is checked: the module's own forward and a silent recomputation (no hook functions run) both
see the call's arguments, in eval mode, and must agree to ``1e-4`` relative to the output's scale (looser for
low-precision dtypes); patterns are compared too where the module returns them. Only then does the hooked
recomputation produce the call's result, so a spec that does not describe its module never returns a wrong
answer. The recomputation applies no attention dropout. Scores are scaled, soft-capped, then masked (the order
of ``transformers``' eager attention); a spec with a soft-cap therefore always runs the explicit path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from hooks.attention_spec import (
    Args,
    AttentionSpec,
    AttentionSpecError,
    Kwargs,
    call_part,
    causal_mask,
    effective_mask,
    first_tensor,
    head_layout,
    out_weights,
)
from hooks.point import HookPoint

OutputFn = Callable[[torch.Tensor, torch.Tensor | None], Any]


class Switch:
    """A flag shared by an attachment's module hooks and its attention forwards."""

    def __init__(self) -> None:
        self.on = False


class SpecForward:
    """A callable installed as ``module.forward``; holds the module's hook points.

    Args:
        module: the attention module.
        path: its path in the attached model (for messages).
        spec: how it computes.
        points: hook name (``hook_q``...) -> HookPoint, already named.
        original: the module's own forward, run once by the check.
        muted: a switch that the attachment's module hooks obey; on during the check, so that hook functions
            on the module's parts see only the real run.
    """

    def __init__(
        self,
        module: nn.Module,
        path: str,
        spec: AttentionSpec,
        points: dict[str, HookPoint],
        original: Callable[..., Any],
        muted: Switch,
    ) -> None:
        self.module, self.path, self.spec, self.points, self.original = module, path, spec, points, original
        self.muted = muted
        self.output: OutputFn | None = spec.output
        self.needs_pattern = False
        self.checked = False

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not self.checked:
            self._check(args, kwargs)
        explicit = (
            self.needs_pattern
            or self.spec.softcap is not None  # the fused kernel cannot cap scores
            or any(
                self.points[n].active
                for n in ("hook_attn_scores", "hook_pattern", "hook_result")
                if n in self.points
            )
        )
        out, pattern = self.compute(args, kwargs, explicit=explicit, silent=False)
        return self.output(out, pattern)

    def compute(
        self, args: Args, kwargs: Kwargs, *, explicit: bool, silent: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The module's output ``[batch, pos, d_model]`` and, on the explicit path, the pattern."""
        spec, module = self.spec, self.module

        def point(name: str, x: torch.Tensor) -> torch.Tensor:
            return x if silent else self.points[name](x)

        x = spec.inputs(module, args, kwargs) if spec.inputs is not None else first_tensor(args, kwargs)
        if not isinstance(x, torch.Tensor) or x.ndim != 3:
            got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise AttentionSpecError(
                f"{self.path!r}: the attention input must be [batch, pos, d_model], got {got}; "
                "pass inputs=fn(module, args, kwargs) in the spec to pick the right argument"
            )
        q, k, v = self._project(x)
        q, k, v = point("hook_q", q), point("hook_k", k), point("hook_v", v)
        if spec.q_norm is not None:
            q, k = self._norm(spec.q_norm, q), self._norm(spec.k_norm, k)
        if spec.rotary is not None:
            q, k = spec.rotary(q, k, module, args, kwargs)
        if spec.rotary is not None or spec.q_norm is not None:
            q, k = point("hook_rot_q", q), point("hook_rot_k", k)
        if spec.kv_cache is not None:
            k, v = spec.kv_cache(k, v, module, args, kwargs)  # [batch, key_pos, kv_head, d_head]
        mask = spec.mask(module, args, kwargs) if spec.mask is not None else None
        mask = effective_mask(spec, mask, q.shape[1], k.shape[1], q.device)
        scale = spec.scale if spec.scale is not None else q.shape[-1] ** -0.5
        if explicit:
            z, pattern = self._explicit(q, k, v, mask, scale, point)
        else:
            z, pattern = self._fused(q, k, v, mask, scale), None
        z = point("hook_z", z)  # [batch, pos, head, d_head]
        if spec.out is None:
            out = z.flatten(-2)
        elif not silent and self.points["hook_result"].active:
            w_o, b_o = out_weights(spec.out, module, z.shape[2], z.shape[3], z)
            result = point(
                "hook_result", torch.einsum("bphe,hed->bphd", z, w_o)
            )  # [batch, pos, head, d_model]
            out = result.sum(dim=2) if b_o is None else result.sum(dim=2) + b_o
        else:
            out = call_part(spec.out, module, z.flatten(-2))  # [batch, pos, d_model]
        if spec.post is not None:
            out = spec.post(out, module, args, kwargs)
        return out, pattern

    def _norm(self, part: Any, x: torch.Tensor) -> torch.Tensor:
        """A q/k norm over each head (``[..., d_head]``) or over the whole projection."""
        if self.spec.qk_norm == "head":
            return call_part(part, self.module, x)
        return call_part(part, self.module, x.flatten(-2)).unflatten(
            -1, x.shape[-2:]
        )  # [batch, pos, head, e]

    def _project(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        spec, module = self.spec, self.module
        if spec.qkv is not None:
            fused = call_part(spec.qkv, module, x)  # [batch, pos, (head + 2 kv_head) d_head]
            h, g, e = self._layout({"qkv": fused.shape[-1]})
            if spec.qkv_layout == "heads":
                if g != h:
                    raise self._shape_error(
                        f"a per-head fused qkv needs n_kv_heads = n_heads, got {g} and {h}"
                    )
                per_head = fused.unflatten(-1, (h, 3, e))  # [batch, pos, head, 3, d_head]
                parts = dict(zip(spec.qkv_order, per_head.unbind(-2), strict=True))
                return parts["q"], parts["k"], parts["v"]
            widths = {"q": h * e, "k": g * e, "v": g * e}
            parts = dict(
                zip(spec.qkv_order, fused.split([widths[c] for c in spec.qkv_order], dim=-1), strict=True)
            )
            flat = parts["q"], parts["k"], parts["v"]
        else:
            flat = tuple(call_part(p, module, x) for p in (spec.q, spec.k, spec.v))
            _, _, e = self._layout({name: t.shape[-1] for name, t in zip("qkv", flat, strict=True)})
        q, k, v = (t.unflatten(-1, (-1, e)) for t in flat)  # [batch, pos, head, d_head]
        return q, k, v

    def _layout(self, widths: dict[str, int]) -> tuple[int, int, int]:
        try:
            return head_layout(self.spec, widths)
        except AttentionSpecError as err:
            raise self._shape_error(str(err)) from None

    def _shape_error(self, detail: str) -> AttentionSpecError:
        return AttentionSpecError(
            f"the attention spec for {self.path!r} does not fit {type(self.module).__name__}: {detail}"
        )

    def _fused(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, scale: float
    ) -> torch.Tensor:
        q, k, v = (rearrange(t, "b p h e -> b h p e") for t in (q, k, v))
        is_causal = False
        if mask is None and self.spec.causal:
            if q.shape[2] == k.shape[2]:
                is_causal = True
            else:
                mask = causal_mask(q.shape[2], k.shape[2], q.device)
        if k.shape[1] != q.shape[1]:
            r = q.shape[1] // k.shape[1]
            k, v = k.repeat_interleave(r, dim=1), v.repeat_interleave(r, dim=1)
        z = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal, scale=scale)
        return rearrange(z, "b h p e -> b p h e")  # [batch, pos, head, d_head]

    def _explicit(self, q, k, v, mask, scale, point) -> tuple[torch.Tensor, torch.Tensor]:
        r = q.shape[2] // k.shape[2]
        q_grouped = rearrange(q, "b q (g r) e -> b g r q e", r=r)
        scores = torch.einsum("bgrqe,bkge->bgrqk", q_grouped, k) * scale
        scores = rearrange(scores, "b g r q k -> b (g r) q k")  # [batch, head, query, key]
        if self.spec.softcap is not None:
            scores = self.spec.softcap * torch.tanh(scores / self.spec.softcap)
        if mask is None and self.spec.causal:
            mask = causal_mask(scores.shape[2], scores.shape[3], scores.device)
        if mask is not None and mask.dtype == torch.bool:
            scores = scores.masked_fill(~mask, float("-inf"))
        elif mask is not None:
            scores = scores + mask  # additive, as the model gave it
        scores = point("hook_attn_scores", scores)
        pattern = scores.softmax(dim=-1, dtype=torch.float32).to(q.dtype)
        if mask is not None and mask.dtype == torch.bool:
            # A query allowed no key gets a zero row, as scaled_dot_product_attention gives it.
            pattern = pattern.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
        pattern = point("hook_pattern", pattern)
        pattern_grouped = rearrange(pattern, "b (g r) q k -> b g r q k", r=r)
        z = torch.einsum("bgrqk,bkge->bqgre", pattern_grouped, v)
        return rearrange(z, "b q g r e -> b q (g r) e"), pattern  # [batch, pos, head, d_head]

    def _check(self, args: Args, kwargs: Kwargs) -> None:
        """Compare the recomputation with the module's own forward on this call's arguments."""
        spec = self.spec
        flags = [(m, m.training) for m in self.module.modules()]
        was_muted, self.muted.on = self.muted.on, True
        try:
            self.module.eval()
            with torch.no_grad():
                ref_args, ref_kwargs = spec.check_args(args, kwargs) if spec.check_args else (args, kwargs)
                ref = self.original(*ref_args, **ref_kwargs)
                own_args, own_kwargs = spec.check_args(args, kwargs) if spec.check_args else (args, kwargs)
                out, pattern = self.compute(own_args, own_kwargs, explicit=True, silent=True)
        finally:
            self.muted.on = was_muted
            for m, training in flags:
                m.training = training
        ref_out, ref_pattern = self._infer_output(ref, out, pattern)
        self._compare("output", out, ref_out)
        if ref_pattern is not None:
            self._compare("attention pattern", pattern, ref_pattern)
        self.checked = True

    def _infer_output(self, ref: Any, out: torch.Tensor, pattern: torch.Tensor) -> tuple[Any, Any]:
        """The module's output and pattern within ``ref``; sets ``self.output`` to rebuild that structure."""
        if self.output is not None:  # the user's output function; compare the first tensor it holds
            items = (
                ref.values() if isinstance(ref, dict) else ref if isinstance(ref, (tuple, list)) else (ref,)
            )
            return next((t for t in items if isinstance(t, torch.Tensor)), ref), None
        if isinstance(ref, torch.Tensor):
            self.output = _tensor_output
            return ref, None
        if isinstance(ref, tuple) and ref and isinstance(ref[0], torch.Tensor):
            slots = []
            for i, item in enumerate(ref[1:], start=1):
                if item is not None and not (isinstance(item, torch.Tensor) and item.shape == pattern.shape):
                    raise AttentionSpecError(
                        f"{self.path!r}: {type(self.module).__name__} returns a {type(item).__name__} at "
                        f"position {i} of its output, which the recomputation cannot produce; pass "
                        "output=fn(out, pattern) in the spec"
                    )
                slots.append(item is not None)
            self.needs_pattern = any(slots)
            self.output = _tuple_output(tuple(slots))
            pattern_ref = next((item for item in ref[1:] if item is not None), None)
            return ref[0], pattern_ref
        raise AttentionSpecError(
            f"{self.path!r}: {type(self.module).__name__} returns a {type(ref).__name__}; the recomputation "
            "rebuilds a tensor or a tuple (output, pattern or None, ...); pass output=fn(out, pattern) in "
            "the spec"
        )

    def _compare(self, what: str, got: torch.Tensor, want: Any) -> None:
        if not isinstance(want, torch.Tensor) or got.shape != want.shape:
            shape = tuple(want.shape) if isinstance(want, torch.Tensor) else type(want).__name__
            raise AttentionSpecError(
                f"the attention spec for {self.path!r} does not describe {type(self.module).__name__}: the "
                f"recomputed {what} has shape {tuple(got.shape)}, the module's own {shape}"
            )
        want = want.to(got.dtype)
        diff = (got - want).abs().masked_fill(got.isnan() & want.isnan(), 0).nan_to_num(nan=float("inf"))
        scale = max(1.0, float(want.abs().nan_to_num(posinf=0, neginf=0).max()))
        eps = torch.finfo(got.dtype).eps if got.is_floating_point() else 0.0
        tol = max(1e-4, 8 * eps) * scale
        worst = float(diff.max())
        if worst > tol:
            raise AttentionSpecError(
                f"the attention spec for {self.path!r} does not describe {type(self.module).__name__}: the "
                f"recomputed {what} differs from the module's own by up to {worst:.3g} (tolerance "
                f"{tol:.1g}); check n_heads, n_kv_heads, d_head, the q/k/v parts and qkv_order, rotary, "
                "causal, mask and scale"
            )


def _tensor_output(out: torch.Tensor, pattern: torch.Tensor | None) -> torch.Tensor:
    return out


def _tuple_output(slots: tuple[bool, ...]) -> OutputFn:
    def output(out: torch.Tensor, pattern: torch.Tensor | None) -> tuple:
        return (out, *(pattern if wants else None for wants in slots))

    return output
