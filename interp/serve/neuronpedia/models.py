"""The requests of Neuronpedia's inference API (``/v1/...``), with the field names and types its published client
(``neuronpedia-inference-client`` 1.10) sends.

Types are strict (a string where a number belongs is refused, not converted) and a field the API does not
have is refused rather than ignored. Whether a value is one the server can honour (a known source, a size
within the limits) is checked by the routes, with messages naming the value.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

SteerMethod = Literal["SIMPLE_ADDITIVE", "ORTHOGONAL_DECOMP", "PROJECTION_CAP"]
SteerType = Literal["STEERED", "DEFAULT"]


class Request(BaseModel):
    """Strict fields, no others."""

    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)


class TokenizeRequest(Request):
    model: str
    text: str
    prepend_bos: bool | None = None


class _Single(Request):
    model: str
    source: str | None = None
    index: str | None = None
    vector: list[float] | None = None
    hook: str | None = None


class ActivationSingleRequest(_Single):
    prompt: str


class ActivationSingleBatchRequest(_Single):
    prompts: list[str]


class _All(Request):
    model: str
    source_set: str
    selected_sources: list[str]
    sort_by_token_indexes: list[int]
    ignore_bos: bool
    num_results: int | None = 25


class ActivationAllRequest(_All):
    prompt: str


class ActivationAllBatchRequest(_All):
    prompts: list[str]


class _TopkByToken(Request):
    model: str
    source: str
    top_k: int | None = None
    ignore_bos: bool


class ActivationTopkByTokenRequest(_TopkByToken):
    prompt: str


class ActivationTopkByTokenBatchRequest(_TopkByToken):
    prompts: list[str]


class ActivationSourceRequest(Request):
    prompts: list[str]
    model: str
    source: str


class SteerFeature(Request):
    model: str
    source: str
    index: int
    strength: float
    steering_vector: list[float] | None = None


class SteerVector(Request):
    steering_vector: list[float]
    strength: float
    hook: str


class ChatMessage(Request):
    content: str
    role: str


class _Steer(Request):
    model: str
    steer_method: SteerMethod
    normalize_steering: bool
    types: Annotated[list[SteerType], Field(min_length=1)]
    features: list[SteerFeature] | None = None
    vectors: list[SteerVector] | None = None
    n_completion_tokens: Annotated[int, Field(ge=1)]
    temperature: Annotated[float, Field(ge=0)]
    strength_multiplier: float
    freq_penalty: float
    seed: float
    stream: bool | None = False
    n_logprobs: Annotated[int, Field(ge=0, le=10)] | None = 0


class SteerCompletionRequest(_Steer):
    prompt: str


class SteerCompletionChatRequest(_Steer):
    prompt: list[ChatMessage]
    is_assistant_axis: bool | None = False
    steer_special_tokens: bool


class UtilSaeVectorRequest(Request):
    model: str
    source: str
    index: int


class NPFeature(Request):
    model: str
    source: str
    index: int


class UtilSaeTopkByDecoderCossimRequest(Request):
    feature: NPFeature | None = None
    vector: list[float] | None = None
    model: str
    source: str
    num_results: int
