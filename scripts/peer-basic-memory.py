#!/usr/bin/env python3
"""The peer side of scripts/bench-memory-locomo: basic-memory (its own Python code, in this
process) on the corpus the bench made. Run with the peer's interpreter (basic-memory needs
Python >= 3.12):

    PEER/bin/python scripts/peer-basic-memory.py --corpus DIR [--pad N]
        [--mode fts|hybrid --model GGUF [--llama-server PATH]]

One round: a fresh config directory and SQLite database; one basic-memory project per folder
of DIR/pages, its files copied in; the project indexed as `basic-memory reindex --search`
does it (the project-index coordinator, full-text search only: no embeddings); then every
question of DIR/questions.jsonl asked through `SearchService.search` (what its search API and
its `search_notes` MCP tool call) in its conversation's project, FTS retrieval, limit 10, each
call timed. With --pad, copies of the pages go into one more project (`padding`,
`copy-K/<project>/...`) until the store holds N pages, that project is indexed (timed), and
the questions are asked again. Prints one JSON line in the shape of the Rust side's.

`--mode hybrid`: basic-memory's own hybrid retrieval (its chunking, sqlite-vec vectors, its
score-based fusion of FTS and vector rankings; reranker off, its default) over the same
sentence encoder as ai-memory's hybrid, all-MiniLM-L6-v2: its default FastEmbed model cannot
be downloaded here (no model hub), so its OpenAI-compatible provider is pointed at
llama-server serving the GGUF ai-memory converted (`--embedding --pooling mean`). The project
is indexed with embeddings (timed in the load). sqlite-vec needs SQLite extension loading,
which the peer's CPython lacks here, so the process uses `pysqlite3` (a build of the sqlite3
module that has it) in place of the standard module: `pip install pysqlite3-binary`.
"""

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--pad", type=int, default=0)
    ap.add_argument("--mode", choices=["fts", "hybrid"], default="fts")
    ap.add_argument("--model", help="hybrid: the encoder GGUF llama-server serves")
    ap.add_argument("--llama-server",
                    default=str(Path.home() / ".cache/aerix/engine/llama-server"))
    return ap.parse_args()


def start_embedder(args):
    """llama-server serving the encoder's embeddings on a free loopback port."""
    import socket
    import subprocess
    import urllib.request
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [args.llama_server, "-m", args.model, "--embedding", "--pooling", "mean",
         "--host", "127.0.0.1", "--port", str(port), "-c", "512", "-b", "512", "-ub", "512",
         "--threads", "2"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(600):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
            return proc, f"http://127.0.0.1:{port}/v1"
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("llama-server did not start")


def read_pages(root):
    pages = []
    for project in sorted(p for p in root.iterdir() if p.is_dir()):
        for f in sorted(project.rglob("*.md")):
            pages.append((project.name, str(f.relative_to(project)), f.read_text()))
    return pages


async def main(args, work):
    # basic-memory reads its settings when imported: isolate them first.
    os.environ["BASIC_MEMORY_CONFIG_DIR"] = str(work / "config")
    os.environ["BASIC_MEMORY_HOME"] = str(work / "home")
    os.environ.setdefault("BASIC_MEMORY_LOG_LEVEL", "ERROR")
    os.environ["HF_HUB_OFFLINE"] = "1"
    corpus = Path(args.corpus)
    pages = read_pages(corpus / "pages")
    questions = [json.loads(l) for l in open(corpus / "questions.jsonl") if l.strip()]
    projects = sorted({p for p, _, _ in pages})
    for project, path, text in pages:
        f = work / "projects" / project / path
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
    hybrid = args.mode == "hybrid"
    embedder, api = start_embedder(args) if hybrid else (None, None)
    write_config(work, projects + (["padding"] if args.pad > len(pages) else []), api)

    from loguru import logger

    logger.remove()
    from basic_memory import db
    from basic_memory.config import ConfigManager
    from basic_memory.index.local_project import (
        LocalProjectIndexRuntimeFactory,
        run_local_project_index_for_project,
    )
    from basic_memory.markdown.entity_parser import EntityParser
    from basic_memory.markdown.markdown_processor import MarkdownProcessor
    from basic_memory.repository import EntityRepository, ProjectRepository
    from basic_memory.repository.search_repository import create_search_repository
    from basic_memory.schemas.search import SearchQuery, SearchRetrievalMode
    from basic_memory.services.file_service import FileService
    from basic_memory.services.initialization import reconcile_projects_with_config
    from basic_memory.services.search_service import SearchService

    app_config = ConfigManager().config
    await reconcile_projects_with_config(app_config)
    _, session_maker = await db.get_or_create_db(
        db_path=app_config.database_path, db_type=db.DatabaseType.FILESYSTEM)
    async with db.scoped_session(session_maker) as session:
        rows = {p.name: p for p in await ProjectRepository().get_active_projects(session)}

    async def index(names):
        for name in names:
            result = await run_local_project_index_for_project(
                rows[name], runtime_factory=LocalProjectIndexRuntimeFactory(), embeddings=hybrid)
            failed = [f for b in result.batch_results for f in b.file_results
                      if f.status.value == "failed"]
            if failed:
                raise SystemExit(f"{name}: {len(failed)} files not indexed: {failed[0]}")

    services = {}

    def service(name):
        if name not in services:
            proj = rows[name]
            parser = EntityParser(Path(proj.path))
            files = FileService(Path(proj.path), MarkdownProcessor(parser, app_config=app_config),
                                app_config=app_config)
            services[name] = SearchService(
                create_search_repository(session_maker, project_id=proj.id,
                                         app_config=app_config),
                EntityRepository(project_id=proj.id), files, session_maker=session_maker)
        return services[name]

    root_of = {name: Path(rows[name].path) for name in rows}

    async def ask(n_pages, load_s):
        times_ms, top = [], []
        for q in questions:
            svc = service(q["project"])
            mode = SearchRetrievalMode.HYBRID if hybrid else SearchRetrievalMode.FTS
            query = SearchQuery(text=q["question"], retrieval_mode=mode)
            t = time.perf_counter()
            results = await svc.search(query, limit=10)
            times_ms.append((time.perf_counter() - t) * 1e3)
            top.append([rel(r.file_path, root_of[q["project"]]) for r in results])
        return {"pages": n_pages, "load_s": load_s, "reindex_s": None, "times_ms": times_ms,
                "top": top}

    started = time.perf_counter()
    await index(projects)
    stages = [await ask(len(pages), time.perf_counter() - started)]

    if args.pad > len(pages):
        n, k = len(pages), 1
        while n < args.pad:
            for project, path, text in pages:
                if n >= args.pad:
                    break
                f = Path(rows["padding"].path) / f"copy-{k}" / project / path
                f.parent.mkdir(parents=True, exist_ok=True)
                f.write_text(text)
                n += 1
            k += 1
        started = time.perf_counter()
        await index(["padding"])
        stages.append(await ask(n, time.perf_counter() - started))
    await db.shutdown_db()
    if embedder:
        embedder.kill()
    print(json.dumps({"side": "basic-memory", "stages": stages}))


def rel(file_path, root):
    """A result's path inside its project, as the questions name evidence."""
    p = Path(file_path)
    return str(p.relative_to(root)) if p.is_absolute() else str(p)


def write_config(work, projects, api=None):
    config = work / "config"
    config.mkdir(parents=True)
    entries = {name: {"path": str(work / "projects" / name)} for name in projects}
    for name in projects:
        (work / "projects" / name).mkdir(parents=True, exist_ok=True)
    (config / "config.json").write_text(json.dumps({
        "projects": entries, "default_project": projects[0],
        "sync_changes": False, "update_permalinks_on_move": False,
        **({"semantic_embedding_provider": "openai",
            "semantic_embedding_model": "all-MiniLM-L6-v2",
            "semantic_embedding_api_base": api, "semantic_embedding_api_key": "local",
            "semantic_embedding_dimensions": 384} if api else {}),
    }))


if __name__ == "__main__":
    args = parse_args()
    if args.mode == "hybrid":
        if not args.model:
            sys.exit("--mode hybrid needs --model GGUF")
        import pysqlite3
        sys.modules["sqlite3"] = pysqlite3
        sys.modules["sqlite3.dbapi2"] = pysqlite3.dbapi2
    work = Path(tempfile.mkdtemp(prefix="peer-basic-memory-"))
    try:
        asyncio.run(main(args, work))
    finally:
        shutil.rmtree(work, ignore_errors=True)
