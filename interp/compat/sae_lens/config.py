"""``sae.cfg`` as SAELens 6 lays it out, while it stays interp's :class:`~interp.sae.SAEConfig`.

SAELens 6 code reads ``sae.cfg.d_in``, ``d_sae``, ``dtype``, ``device``, ``apply_b_dec_to_input``,
``normalize_activations``, ``reshape_activations``, ``k`` (TopK), ``cfg.architecture()`` and, for what the SAE
was trained on, ``cfg.metadata.hook_name``, ``model_name``, ``context_size``, ``prepend_bos``, ``dataset_path``,
``hook_head_index``... (``None`` for what the file did not record). interp's own code (the splice, evaluation,
saving) reads the same object as its :class:`~interp.sae.SAEConfig`. :class:`SAELensConfig` is that config with
the differences bridged: ``architecture`` is interp's name that can also be called for SAELens's (a BatchTopK
SAE is a JumpReLU one at inference, as SAELens loads it; transcoders have their own names), ``metadata`` is a
dict that also answers by attribute, and ``device`` says where the weights are. ``to_dict`` and ``from_dict``
use SAELens 6's ``cfg.json`` layout. Like interp's config it is frozen: build a new one with
``dataclasses.replace``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from interp.sae import SAEConfig
from interp.sae.formats.saelens import _ARCHITECTURES as _INTERP_NAMES

METADATA_KEYS = (
    "model_name",
    "hook_name",
    "model_class_name",
    "hook_head_index",
    "model_from_pretrained_kwargs",
    "prepend_bos",
    "exclude_special_tokens",
    "neuronpedia_id",
    "context_size",
    "seqpos_slice",
    "dataset_path",
    "sae_lens_version",
    "sae_lens_training_version",
    "hook_name_out",
    "hook_head_index_out",
    "hf_hook_name",
    "hf_hook_name_out",
)
"""What SAELens keeps in ``cfg.metadata`` (what the SAE was trained on, rather than what it computes)."""

_PRE_6_NAMES = {"hook_point": "hook_name", "hook_point_head_index": "hook_head_index"}

# SAELens's architecture names <-> interp's (architecture, transcoder, skip), as interp's SAELens reader maps
# them; SAELens runs a BatchTopK SAE as a JumpReLU one at inference.
_SAELENS_NAMES = {fields: name for name, fields in _INTERP_NAMES.items() if name != "batchtopk"}
_SAELENS_NAMES["batchtopk", False, False] = "jumprelu"


class Architecture(str):
    """interp's architecture name (``cfg.architecture == "topk"``) that SAELens code may call:
    ``cfg.architecture()`` gives SAELens's name for it."""

    saelens: str

    def __new__(cls, name: str, saelens: str) -> Architecture:
        value = super().__new__(cls, name)
        value.saelens = saelens
        return value

    def __call__(self) -> str:
        return self.saelens

    def __reduce__(self) -> tuple[Any, tuple[str, str]]:
        return (Architecture, (str(self), self.saelens))


class SAEMetadata(dict):
    """SAELens's ``cfg.metadata``: a dict whose keys are also attributes, ``None`` for keys never set."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self.get(name)

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value

    def to_dict(self) -> dict[str, Any]:
        return dict(self)


@dataclasses.dataclass(frozen=True, kw_only=True)
class SAELensConfig(SAEConfig):
    """interp's :class:`~interp.sae.SAEConfig` with SAELens 6's names (see the module docstring)."""

    @property
    def device(self) -> str:
        """Where the SAE's weights are (``"cpu"`` until the SAE moves them)."""
        return self.__dict__.get("_device", "cpu")

    def to_dict(self) -> dict[str, Any]:
        """The config in SAELens 6's ``cfg.json`` layout."""
        out: dict[str, Any] = {
            "architecture": self.architecture(),
            "d_in": self.d_in,
            "d_sae": self.d_sae,
            "dtype": self.dtype,
            "device": self.device,
            "apply_b_dec_to_input": self.apply_b_dec_to_input,
            "normalize_activations": self.normalize_activations,
            "reshape_activations": self.reshape_activations,
            "metadata": dict(self.metadata),
        }
        if self.architecture == "topk":
            out.update(k=self.k, rescale_acts_by_decoder_norm=self.rescale_acts_by_decoder_norm)
        if self.transcoder:
            out["d_out"] = self.width_out
        return out

    @classmethod
    def from_dict(cls, config: dict[str, Any]) -> SAELensConfig:
        """A config from SAELens's ``cfg.json`` layout (6.x, or earlier with its old names)."""
        if not isinstance(config, dict) or "d_in" not in config or "d_sae" not in config:
            raise ValueError(f"a SAELens config is a dict with d_in and d_sae; got {config!r}")
        name = config.get("architecture", "standard")
        if name not in _INTERP_NAMES:
            raise ValueError(
                f"SAELens architecture {name!r} is not supported; supported: {sorted(_INTERP_NAMES)}"
            )
        architecture, transcoder, skip = _INTERP_NAMES[name]
        metadata = metadata_of(config)
        return cls(
            d_in=config["d_in"],
            d_sae=config["d_sae"],
            architecture=Architecture(architecture, _SAELENS_NAMES[architecture, transcoder, skip]),
            k=config.get("k") if architecture == "topk" else None,
            transcoder=transcoder,
            skip=skip,
            d_out=config.get("d_out") if transcoder else None,
            hook_name=metadata.hook_name,
            hook_name_out=metadata.hook_name_out if transcoder else None,
            apply_b_dec_to_input=bool(config.get("apply_b_dec_to_input", True)) and not transcoder,
            normalize_activations=config.get("normalize_activations") or "none",
            rescale_acts_by_decoder_norm=bool(config.get("rescale_acts_by_decoder_norm", False)),
            reshape_activations=config.get("reshape_activations") or "none",
            dtype=str(config.get("dtype") or "float32").removeprefix("torch."),
            model_name=metadata.model_name,
            metadata=metadata,
        )


def metadata_of(config: dict[str, Any]) -> SAEMetadata:
    """``cfg.metadata`` of a SAELens ``cfg.json``: its ``metadata`` object (6.x), or the keys SAELens moves there
    from an older flat config (``prepend_bos`` defaulting to true and ``neuronpedia_id`` to none, as SAELens
    defaults them)."""
    if isinstance(config.get("metadata"), dict):
        return SAEMetadata(config["metadata"])
    flat = {_PRE_6_NAMES.get(key, key): value for key, value in config.items()}
    flat.setdefault("prepend_bos", True)
    flat.setdefault("neuronpedia_id", None)
    return SAEMetadata({key: flat[key] for key in METADATA_KEYS if key in flat})


def from_interp(cfg: SAEConfig, device: Any = "cpu") -> SAELensConfig:
    """The SAELens-named config of an interp config (its SAELens metadata kept where it came from SAELens)."""
    if isinstance(cfg, SAELensConfig):
        return cfg
    recorded = cfg.metadata if cfg.metadata.get("format") == "saelens" else {}
    metadata = metadata_of(recorded)
    metadata.update(hook_name=cfg.hook_name, model_name=cfg.model_name)
    if cfg.transcoder:
        metadata["hook_name_out"] = cfg.hook_name_out
    fields = {field.name: getattr(cfg, field.name) for field in dataclasses.fields(cfg)}
    fields["architecture"] = Architecture(
        cfg.architecture, _SAELENS_NAMES.get((cfg.architecture, cfg.transcoder, cfg.skip), cfg.architecture)
    )
    fields["metadata"] = metadata
    out = SAELensConfig(**fields)
    moved(out, device)
    return out


def moved(cfg: SAELensConfig, device: Any) -> SAELensConfig:
    """Record that the weights are on ``device`` (SAELens keeps it in ``cfg.device``)."""
    object.__setattr__(cfg, "_device", str(device))
    return cfg
