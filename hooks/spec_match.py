"""Which attention spec applies to which module of an attached model, checked when attaching.

Specs are given by module path pattern. In a pattern, ``*`` matches within one path segment (it stops at a
dot), ``**`` as a whole segment matches any number of segments, ``?`` one character of a segment, and
``[...]`` a character class:

- ``"layers.*.attn"`` matches ``layers.0.attn``, not ``layers.0.attn.qkv`` nor ``layers.0.inner.attn``;
- ``"**.attn"`` matches ``attn``, ``layers.0.attn`` and ``encoder.layers.3.attn``;
- ``"layers.**"`` matches everything below ``layers``;
- ``""`` is the attached module itself.

A spec is checked against every module its pattern matches, before anything runs: each part named by a path
(``qkv="qkv"``) must be a submodule, and where the parts are ``nn.Linear`` their widths must split into the
spec's heads. A pattern that matches a module the spec cannot fit raises (naming the pattern, the module and
what is wrong) rather than skipping it: a pattern selects modules to rewrite, and quietly leaving some out
would hook fewer layers than were asked for. To choose modules by more than their path, pass
``fn(submodule) -> spec | None`` for the pattern instead of a spec.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping

from torch import nn

from hooks.attention_spec import AttentionSpec, AttentionSpecError, head_layout
from hooks.hf_specs import builtin_spec

SpecSource = AttentionSpec | Callable[[nn.Module], AttentionSpec | None]

_PARTS = ("q", "k", "v", "qkv", "out", "q_norm", "k_norm")


def path_regex(pattern: str) -> re.Pattern[str]:
    """The regular expression for a module path pattern (see the module docstring).

    >>> bool(path_regex("layers.*.attn").fullmatch("layers.0.attn"))
    True
    >>> bool(path_regex("layers.*").fullmatch("layers.0.attn"))
    False
    >>> bool(path_regex("**.attn").fullmatch("model.layers.3.attn"))
    True
    """
    segments = pattern.split(".")
    if segments == ["**"]:
        return re.compile(r".*")
    out = ""
    for i, segment in enumerate(segments):
        if segment == "**":
            if i == 0:
                out += r"(?:[^.]+\.)*"  # any leading segments; the next one follows without a dot
            elif i == len(segments) - 1:
                out += r"(?:\.[^.]+)+"  # at least one segment below
            else:
                out += r"(?:\.[^.]+)*"
            continue
        joined = i > 0 and not (i == 1 and segments[0] == "**")
        out += (r"\." if joined else "") + _segment_regex(segment)
    return re.compile(out)


def _segment_regex(segment: str) -> str:
    out, i = "", 0
    while i < len(segment):
        char = segment[i]
        if char == "*":
            out += r"[^.]*"
        elif char == "?":
            out += r"[^.]"
        elif char == "[" and (end := segment.find("]", i + 2)) != -1:
            body = segment[i + 1 : end]
            body = "^" + body[1:] if body.startswith("!") else body
            out += "[" + body.replace("\\", "\\\\") + "]"
            i = end
        else:
            out += re.escape(char)
        i += 1
    return out


def find_specs(
    root: nn.Module, attention: Mapping[str, SpecSource], builtin_specs: bool
) -> dict[str, AttentionSpec]:
    """Module path -> spec: the first pattern that matches a path, else the built-in table; each checked.

    Raises:
        ValueError: a pattern matches no module path (with close paths).
        AttentionSpecError: a spec does not fit a module its pattern matches.
        TypeError: a spec function returned something that is not an AttentionSpec.
    """
    paths = dict(root.named_modules())
    compiled = {pattern: path_regex(pattern) for pattern in attention}
    for pattern, regex in compiled.items():
        if not any(regex.fullmatch(path) for path in paths):
            close = difflib.get_close_matches(pattern, list(paths), n=3, cutoff=0.5)
            hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise ValueError(
                f"the attention pattern {pattern!r} matches no module path{hint} (in a pattern '*' stays "
                "within one path segment and '**' spans any number of them)"
            )
    specs: dict[str, AttentionSpec] = {}
    for path, module in paths.items():
        pattern = next((p for p, regex in compiled.items() if regex.fullmatch(path)), None)
        source = attention[pattern] if pattern is not None else None
        spec = source(module) if source is not None and not isinstance(source, AttentionSpec) else source
        key = f"the attention pattern {pattern!r}" if pattern is not None else "the built-in spec"
        if spec is None and builtin_specs:
            spec = builtin_spec(module)
        if spec is not None and not isinstance(spec, AttentionSpec):
            raise TypeError(
                f"the attention spec for {path!r} is a {type(spec).__name__}, not an AttentionSpec"
            )
        if spec is not None:
            check_fit(spec, module, path, key)
            specs[path] = spec
    return specs


def check_fit(spec: AttentionSpec, module: nn.Module, path: str, key: str) -> None:
    """Raise unless ``spec``'s named parts are submodules of ``module`` and their widths split into heads.

    Args:
        spec: the spec.
        module: the module it is to describe.
        path: the module's path in the attached model.
        key: where the spec came from (``"the attention pattern 'layers.*'"``), for the message.
    """
    where = f"{key} matches {path or 'the attached module'!r} ({type(module).__name__})"
    children = [name for name, _ in module.named_modules() if name]
    found: dict[str, nn.Module] = {}
    for field in _PARTS:
        part = getattr(spec, field)
        if not isinstance(part, str):
            continue
        try:
            found[field] = module.get_submodule(part)
        except AttributeError:
            close = difflib.get_close_matches(part, children, n=3, cutoff=0.5)
            hint = (
                f"did you mean {', '.join(map(repr, close))}?"
                if close
                else f"its submodules: {children[:12]}"
            )
            raise AttentionSpecError(
                f"{where}, which has no submodule {part!r} (the spec's {field}={part!r}); {hint}. Narrow the "
                "pattern, or pass fn(submodule) -> AttentionSpec | None to choose modules"
            ) from None
    widths = {f: m.out_features for f, m in found.items() if f != "out" and isinstance(m, nn.Linear)}
    fused = spec.qkv is not None
    if (fused and "qkv" in widths) or (not fused and len(widths) == 3):
        try:
            h, _, e = head_layout(spec, {"qkv": widths["qkv"]} if fused else widths)
        except AttentionSpecError as err:
            raise AttentionSpecError(f"{where}, which the spec does not fit: {err}") from None
        out = found.get("out")
        if isinstance(out, nn.Linear) and out.in_features != h * e:
            raise AttentionSpecError(
                f"{where}, which the spec does not fit: out={spec.out!r} takes {out.in_features} features, "
                f"but the heads give n_heads x d_head = {h} x {e} = {h * e}"
            )
