"""Run in circuit-tracer's environment: serve a graph folder with circuit-tracer's own local server, request
what its page requests, and validate each answer with circuit-tracer's own pydantic models.

Usage: ``python serve_check.py FOLDER RESULT.json``. The page (``frontend/assets``) asks for
``./data/graph-metadata.json``, then ``./graph_data/<slug>.json``, then for a clicked feature node whose graph's
``metadata.scan`` starts with ``./``, ``${scan}/${node.feature}.json`` (``feature_examples/init-feature-examples.js``,
``loadFeature``), all relative to the page at the server's root. Writes what it checked to RESULT.json; any
failure raises (a non-zero exit).
"""

from __future__ import annotations

import json
import socket
import sys
import urllib.request

from circuit_tracer.frontend import feature_models, graph_models
from circuit_tracer.frontend.local_server import serve


def get(port: int, path: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/{path.removeprefix('./')}", timeout=30) as answer:
        return answer.status, answer.read()


def main(folder: str, result: str) -> None:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    server = serve(data_dir=folder, port=port)
    try:
        status, page = get(port, "index.html")
        assert status == 200 and b"isLocalServing = true" in page, "the server does not serve its own page"
        graphs = json.loads(get(port, "./data/graph-metadata.json")[1])["graphs"]
        checked = {"graphs": [], "features": {}}
        for meta in graphs:
            graph_models.Metadata.model_validate(meta)
            doc = graph_models.Model.model_validate_json(get(port, f"./graph_data/{meta['slug']}.json")[1])
            scan = doc.metadata.scan
            assert scan.startswith("./") and not scan.startswith("./features/"), scan  # a local scan
            nodes = [n for n in doc.nodes if n.feature_type == "cross layer transcoder"]
            for node in nodes:
                body = get(port, f"{scan}/{node.feature}.json")[1]
                feature = feature_models.Model.model_validate_json(body)
                assert feature.index == node.feature, (feature.index, node.feature)
                checked["features"][str(node.feature)] = {"layer": node.layer, "bytes": len(body)}
            checked["graphs"].append({"slug": meta["slug"], "scan": scan, "feature_nodes": len(nodes)})
        with open(result, "w") as f:
            json.dump(checked, f)
    finally:
        server.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
