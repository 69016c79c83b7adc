"""What the server tests share: Neuronpedia's published client pointed at a live server, tiny random dictionaries
written to folders the server reads (so the loaders are exercised too), and raw HTTP for what a well-behaved
client never sends."""

from __future__ import annotations

import http.client
import json
import socket
from pathlib import Path
from urllib.parse import urlparse

import torch

from interp.sae import SAE, SAEConfig, save, save_transcoders
from interp.serve import Served, Sources
from interp.serve.sources import read_dictionary
from tests.circuits.transcoders import tiny_transcoders

MODEL_ID = "smollm2-135m"


def client(url: str, secret: str | None = None):
    """The published client's API object, talking to ``url``'s ``/v1``."""
    import neuronpedia_inference_client as npc
    from neuronpedia_inference_client.api.default_api import DefaultApi

    configuration = npc.Configuration(host=f"{url}/v1")
    if secret is not None:
        configuration.api_key["SimpleSecretAuth"] = secret
    return DefaultApi(npc.ApiClient(configuration))


def random_sae(d_in: int, hook: str, d_sae: int, seed: int, **fields) -> SAE:
    """A standard (ReLU) SAE with random weights; negative encoder biases keep a minority of latents active."""
    sae = SAE(SAEConfig(d_in=d_in, d_sae=d_sae, architecture="standard", hook_name=hook, **fields))
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        sae.W_enc.copy_(torch.randn(sae.W_enc.shape, generator=g) / d_in**0.5)
        sae.W_dec.copy_(torch.randn(sae.W_dec.shape, generator=g) / d_sae**0.5)
        sae.b_enc.copy_(-0.3 - 0.2 * torch.rand(sae.b_enc.shape, generator=g))
        sae.b_dec.copy_(0.05 * torch.randn(sae.b_dec.shape, generator=g))
    return sae


def dictionaries(model, folder: Path) -> dict[str, Path]:
    """Tiny random dictionaries for ``model``, each saved in its published format: an SAE on the stream at
    layer 3 and one at layer 5 (one source set), an SAE on layer 2's attention mixture (hook_z), and a skip
    transcoder set at every layer."""
    cfg = model.cfg
    paths = {
        "res3": save(random_sae(cfg.d_model, "blocks.3.hook_resid_post", 64, 1), folder / "res3"),
        "res5": save(random_sae(cfg.d_model, "blocks.5.hook_resid_post", 64, 2), folder / "res5"),
        "att2": save(
            random_sae(cfg.n_heads * cfg.d_head, "blocks.2.attn.hook_z", 48, 3, reshape_activations="hook_z"),
            folder / "att2",
        ),
    }
    paths["tc"] = save_transcoders(tiny_transcoders(cfg, d_transcoder=16, kind="skip", seed=5), folder / "tc")
    return paths


def served_with(model, paths: dict[str, Path], **settings) -> Served:
    """A server's state over ``model`` and :func:`dictionaries`' folders: source sets ``res`` (layers 3 and 5),
    ``att`` and ``tc``; the transcoders trace graphs."""
    loaded = {name: read_dictionary(path, model) for name, path in paths.items()}
    sources = Sources(
        [("res", loaded["res3"]), ("res", loaded["res5"]), ("att", loaded["att2"]), ("tc", loaded["tc"])]
    )
    return Served(
        model, MODEL_ID, sources, transcoders=loaded["tc"], transcoders_name=str(paths["tc"]), **settings
    )


def raw(url: str, method: str, path: str, body: bytes | None = None, headers: dict | None = None):
    """``(status, parsed JSON or text)`` of a request sent as given: no client normalises its path or body."""
    where = urlparse(url)
    connection = http.client.HTTPConnection(where.hostname, where.port, timeout=120)
    try:
        connection.putrequest(method, path, skip_accept_encoding=True)
        for key, value in {"Content-Type": "application/json", **(headers or {})}.items():
            connection.putheader(key, value)
        if body is not None:
            connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        response = connection.getresponse()
        text = response.read().decode()
    finally:
        connection.close()
    try:
        return response.status, json.loads(text)
    except ValueError:
        return response.status, text


def post(url: str, path: str, payload: dict, headers: dict | None = None):
    """:func:`raw` with a JSON body."""
    return raw(url, "POST", path, json.dumps(payload).encode(), headers)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
