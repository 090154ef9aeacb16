"""One repository, one space: real git repositories in temporary folders, the real hook
and import as processes, and memories left by the folder-name spaces of before.

``one/api`` and ``two/api`` are two projects with the same folder name; a session worked
in a subfolder belongs to its repository's project, a linked worktree to its main
repository's, and a project whose ``.mcp.json`` already names a space keeps it.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from memory_pipeline.errors import InvalidInputError
from memory_pipeline.sources.projects import session_folder
from memory_pipeline.spaces import marked_space, project_space, repository_root
from tests.capture.helpers import (
    cli,
    found,
    hook_env,
    memory,
    payload,
    space_of,
    spool_of,
    stored_once,
    turn_text,
    wait_idle,
    write_transcript,
)


def git(folder: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
        cwd=folder,
        check=True,
        capture_output=True,
    )


def repository(folder: Path) -> Path:
    """A git repository with one commit and a ``src`` subfolder."""
    (folder / "src").mkdir(parents=True)
    (folder / "src" / "app.py").write_text("print('hi')\n")
    git(folder, "init", "-q", "-b", "main")
    git(folder, "add", ".")
    git(folder, "commit", "-q", "-m", "start")
    return folder


@pytest.fixture
def two_apis(tmp_path: Path) -> tuple[Path, Path]:
    return repository(tmp_path / "one" / "api"), repository(tmp_path / "two" / "api")


def test_two_projects_named_alike_get_two_readable_spaces(two_apis: tuple[Path, Path]) -> None:
    one, two = two_apis
    a, b = project_space(one), project_space(two)
    assert a.name != b.name
    assert a.name.startswith("api-") and b.name.startswith("api-")
    assert (a.root, b.root) == (one.resolve(), two.resolve())


def test_every_subfolder_and_every_path_to_it_is_the_repositorys_project(
    two_apis: tuple[Path, Path], tmp_path: Path
) -> None:
    one, _ = two_apis
    (one / "src" / "deep" / "er").mkdir(parents=True)
    link = tmp_path / "link-to-src"
    link.symlink_to(one / "src")
    want = project_space(one)
    for folder in (one / "src", one / "src" / "deep" / "er", link, one / "src" / ".."):
        assert project_space(folder) == want, folder


def test_a_linked_worktree_shares_its_repositorys_space(
    two_apis: tuple[Path, Path], tmp_path: Path
) -> None:
    one, _ = two_apis
    tree = tmp_path / "elsewhere" / "api-feature"
    git(one, "worktree", "add", "-q", "-b", "feature", str(tree))
    assert (tree / ".git").is_file()
    assert repository_root(tree / "src") == one.resolve()
    assert project_space(tree / "src").name == project_space(one).name


def test_a_folder_outside_any_repository_is_its_own_project(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    assert repository_root(notes) == notes.resolve()
    assert project_space(notes).name == marked_space(notes.resolve())
    gone = tmp_path / "no" / "longer" / "here"
    assert project_space(gone).root == gone
    # Outside a repository, a .mcp.json naming a space makes its folder the project's
    # top, from any folder under it.
    (notes / "drafts").mkdir()
    entry = {"mcpServers": {"hybrid-rag": {"env": {"HYBRID_RAG_SPACE": "notes"}}}}
    (notes / ".mcp.json").write_text(json.dumps(entry))
    assert project_space(notes / "drafts") == project_space(notes)
    assert project_space(notes / "drafts").root == notes.resolve()


def test_a_project_whose_mcp_json_names_a_space_keeps_it(two_apis: tuple[Path, Path]) -> None:
    """A setup made before spaces were marked named the folder: that memory stays the
    project's, from any subfolder; a subfolder with an entry of its own is its own space."""
    one, _ = two_apis
    entry = {"mcpServers": {"hybrid-rag": {"env": {"HYBRID_RAG_SPACE": "api"}}}}
    (one / ".mcp.json").write_text(json.dumps(entry))
    assert project_space(one / "src").name == "api"
    assert project_space(one / "src").how == f"named in {one.resolve() / '.mcp.json'}"
    web = {"mcpServers": {"hybrid-rag": {"env": {"HYBRID_RAG_SPACE": "api-web"}}}}
    (one / "src" / ".mcp.json").write_text(json.dumps(web))
    assert project_space(one / "src").name == "api-web"
    assert project_space(one).name == "api"
    # Anything else in a .mcp.json is not a name: another server, a broken file.
    (one / ".mcp.json").write_text('{"mcpServers": {"other": {"env": {"HYBRID_RAG_SPACE": "x"}}}}')
    assert project_space(one).name == marked_space(one.resolve())
    (one / ".mcp.json").write_text("{broken")
    assert project_space(one).name == marked_space(one.resolve())


def capture(tmp_path: Path, name: str, cwd: Path, turns: int = 2) -> Path:
    """A session worked in ``cwd``, ended: the hook run as Claude Code runs it."""
    transcript = write_transcript(tmp_path / "claude" / f"{name}.jsonl", name, turns, str(cwd))
    done = cli("capture", env=hook_env(tmp_path), stdin=payload(transcript, cwd))
    assert (done.returncode, done.stderr) == (0, "")
    return transcript


def test_a_session_from_a_subfolder_lands_in_its_projects_space_and_nowhere_else(
    two_apis: tuple[Path, Path], tmp_path: Path
) -> None:
    one, two = two_apis
    first = capture(tmp_path, "s1", one / "src")
    second = capture(tmp_path, "s2", two)
    wait_idle(spool_of(tmp_path))
    with memory(tmp_path, space_of(one)) as system:
        assert stored_once(system, first)
        assert found(system, turn_text("s1", 2))
        assert not found(system, turn_text("s2", 2))
    with memory(tmp_path, space_of(two)) as system:
        assert stored_once(system, second)
        assert not found(system, turn_text("s1", 2))
    for gone in ("src", "api"):  # the folder-name spaces of before get nothing
        with memory(tmp_path, gone) as system:
            assert not system.store.document_ids()
    listing = cli("spaces", env=hook_env(tmp_path))
    assert listing.returncode == 0, listing.stderr
    rows = {line.split()[0]: line for line in listing.stdout.splitlines() if line.strip()}
    assert str(one.resolve()) in rows[space_of(one)]
    assert str(two.resolve()) in rows[space_of(two)]
    assert str(two.resolve()) not in rows[space_of(one)]
    assert "warning" not in listing.stdout


def test_recall_at_session_start_reads_the_same_space_as_capture(
    two_apis: tuple[Path, Path], tmp_path: Path
) -> None:
    one, two = two_apis
    capture(tmp_path, "r1", one, turns=4)
    wait_idle(spool_of(tmp_path))

    def recalled(cwd: Path) -> str:
        start = json.dumps({"hook_event_name": "SessionStart", "cwd": str(cwd)})
        done = cli("recall", "--hook", env=hook_env(tmp_path), stdin=start)
        assert done.returncode == 0 and done.stderr == "", done.stderr
        return done.stdout

    assert "Session r1" in recalled(one / "src")
    assert recalled(two / "src") == ""


def test_an_old_setup_keeps_its_folder_name_space_and_two_roots_on_it_are_named(
    two_apis: tuple[Path, Path], tmp_path: Path
) -> None:
    """The migration: a memory filled by the folder-name spaces of before keeps serving
    each project that names its space; two projects that both named ``api`` are shown
    as sharing it, with what to do."""
    one, two = two_apis
    old = write_transcript(tmp_path / "claude" / "old.jsonl", "old", 2, str(one))
    imported = cli("import", "claude_code", str(old), "--space", "api", env=hook_env(tmp_path))
    assert imported.returncode == 0, imported.stderr
    entry = {"mcpServers": {"hybrid-rag": {"env": {"HYBRID_RAG_SPACE": "api"}}}}
    for project in (one, two):
        (project / ".mcp.json").write_text(json.dumps(entry))
    new = capture(tmp_path, "new", one / "src")
    capture(tmp_path, "other", two)
    wait_idle(spool_of(tmp_path))
    with memory(tmp_path, "api") as system:
        assert stored_once(system, old) and stored_once(system, new)
        assert found(system, turn_text("old", 2)) and found(system, turn_text("new", 2))
    listing = cli("spaces", env=hook_env(tmp_path))
    assert "warning: space 'api' holds sessions of 2 project roots" in listing.stdout


def codex_rollout(path: Path, session: str, cwd: str | None) -> Path:
    meta: dict[str, object] = {"id": session, "timestamp": "2026-11-21T09:00:00Z"}
    if cwd is not None:
        meta["cwd"] = cwd
    rows = [
        {"timestamp": "2026-11-21T09:00:00Z", "type": "session_meta", "payload": meta},
        {
            "timestamp": "2026-11-21T09:00:01Z",
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": turn_text(session, 1)}],
            },
        },
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_import_space_auto_keeps_a_whole_historys_projects_apart(
    two_apis: tuple[Path, Path], tmp_path: Path
) -> None:
    one, two = two_apis
    history = tmp_path / "projects"
    a = write_transcript(history / "-one-api" / "a.jsonl", "a", 2, str(one / "src"))
    b = write_transcript(history / "-two-api" / "b.jsonl", "b", 2, str(two))
    env = hook_env(tmp_path)
    done = cli("import", "claude_code", str(history), "--space", "auto", env=env)
    assert done.returncode == 0, done.stderr
    assert f"1 in {space_of(one)}" in done.stdout and f"1 in {space_of(two)}" in done.stdout
    with memory(tmp_path, space_of(one)) as system:
        assert stored_once(system, a) and not found(system, turn_text("b", 2))
    with memory(tmp_path, space_of(two)) as system:
        assert stored_once(system, b) and not found(system, turn_text("a", 2))
    with memory(tmp_path, "auto") as system:
        assert not system.store.document_ids()
    # Codex rollouts: the folder is in session_meta; one without it is refused, not guessed.
    rollouts = tmp_path / "codex"
    codex_rollout(rollouts / "rollout-1.jsonl", "c1", str(two / "src"))
    lost = codex_rollout(rollouts / "rollout-2.jsonl", "c2", None)
    assert session_folder(lost) is None
    done = cli("import", "codex", str(rollouts), "--space", "auto", env=env)
    assert done.returncode == 1
    assert f"refused  {lost}: it names no working folder" in done.stdout
    with memory(tmp_path, space_of(two)) as system:
        assert found(system, turn_text("c1", 1))


def test_import_space_auto_is_refused_for_histories_without_folders(tmp_path: Path) -> None:
    export = tmp_path / "conversations.json"
    export.write_text("[]")
    done = cli("import", "chatgpt", str(export), "--space", "auto", env=hook_env(tmp_path))
    assert done.returncode == 2
    assert "only claude_code and codex histories hold" in done.stderr


def test_spaces_merge_brings_an_old_folder_name_space_home_and_is_idempotent(
    two_apis: tuple[Path, Path], tmp_path: Path
) -> None:
    """Sessions the old hook stored under the subfolder's name (``src``) join the
    project's space with one command; run again, it changes nothing."""
    one, _ = two_apis
    env = hook_env(tmp_path)
    log = write_transcript(tmp_path / "claude" / "old.jsonl", "old", 2, str(one / "src"))
    done = cli("capture", "--space", "src", env=env, stdin=payload(log, one / "src"))
    assert done.returncode == 0
    wait_idle(spool_of(tmp_path))
    home = space_of(one)
    dry = cli("spaces", "--merge", "src", home, env=env)
    assert dry.returncode == 0, dry.stderr
    assert "would move 1 documents" in dry.stdout and "dry run" in dry.stdout
    with memory(tmp_path, home) as system:
        assert not found(system, turn_text("old", 2))
    applied = cli("spaces", "--merge", "src", home, "--apply", "--no-progress", env=env)
    assert applied.returncode == 0, applied.stderr
    assert "moved 1 documents" in applied.stdout and "index version" in applied.stdout
    with memory(tmp_path, home) as system:
        assert stored_once(system, log) and found(system, turn_text("old", 2))
    with memory(tmp_path, "src") as system:
        assert not system.store.document_ids()
    again = cli("spaces", "--merge", "src", home, "--apply", "--no-progress", env=env)
    assert again.returncode == 0, again.stderr
    assert "merged already" in again.stdout


def test_a_monorepo_splits_into_the_spaces_its_settings_name(tmp_path: Path) -> None:
    """``[spaces] split`` in the root's .memory-pipeline.toml: each folder a pattern
    matches is a project of its own, from any folder under it; the rest stays the
    repository's, and a .mcp.json naming a space still wins where it sits."""
    mono = repository(tmp_path / "mono")
    for sub in ("services/auth/src", "services/billing", "web/app", "docs"):
        (mono / sub).mkdir(parents=True)
    (mono / ".memory-pipeline.toml").write_text('[spaces]\nsplit = ["services/*", "web"]\n')
    auth = project_space(mono / "services" / "auth" / "src")
    billing = project_space(mono / "services" / "billing")
    web = project_space(mono / "web" / "app")
    whole = project_space(mono / "docs")
    assert auth.root == (mono / "services" / "auth").resolve()
    assert auth.name == marked_space(auth.root) and auth.name.startswith("auth-")
    assert billing.name.startswith("billing-") and web.name.startswith("web-")
    assert whole == project_space(mono / "services") == project_space(mono)
    assert whole.name == marked_space(mono.resolve())
    assert len({auth.name, billing.name, web.name, whole.name}) == 4
    entry = {"mcpServers": {"hybrid-rag": {"env": {"HYBRID_RAG_SPACE": "auth-old"}}}}
    (mono / "services" / "auth" / "src" / ".mcp.json").write_text(json.dumps(entry))
    assert project_space(mono / "services" / "auth" / "src").name == "auth-old"
    assert project_space(mono / "services" / "auth").name == auth.name
    # A linked worktree splits the same way, into the same spaces.
    git(mono, "add", ".")
    git(mono, "commit", "-q", "-m", "split")
    tree = tmp_path / "mono-feature"
    git(mono, "worktree", "add", "-q", "-b", "feature", str(tree))
    (tree / "services" / "billing" / "x").mkdir(parents=True)
    (tree / "docs").mkdir(exist_ok=True)
    in_tree = project_space(tree / "services" / "billing" / "x")
    assert (in_tree.name, in_tree.root) == (billing.name, billing.root)
    assert project_space(tree / "docs").name == whole.name


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[spaces\n", "is not valid TOML"),
        ('[spaces]\nsplit = "services/*"\n', "must be a list of subfolder patterns"),
        ('[spaces]\nsplit = ["../elsewhere"]\n', "must be a list of subfolder patterns"),
    ],
)
def test_monorepo_settings_that_cannot_be_used_are_refused_by_name(
    tmp_path: Path, text: str, says: str
) -> None:
    mono = repository(tmp_path / "mono")
    settings = mono / ".memory-pipeline.toml"
    settings.write_text(text)
    with pytest.raises(InvalidInputError, match=says) as refused:
        project_space(mono / "src")
    assert str(settings.resolve()) in str(refused.value)
    # The hook says so where Claude Code shows it, and stores nothing in a guessed space.
    log = write_transcript(tmp_path / "claude" / "m.jsonl", "m", 2, str(mono / "src"))
    done = cli("capture", env=hook_env(tmp_path), stdin=payload(log, mono / "src"))
    assert done.returncode == 1 and says in done.stderr and "nothing captured" in done.stderr
