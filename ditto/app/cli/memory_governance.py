"""``ditto memory hygiene``, ``audit`` and ``reindex``: retention, the audit log and the vectors
of the configured store."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from ditto.app.cli.memory_common import ConfigOption, JsonOption, on_store, print_json, progress_bar
from ditto.app.cli.output import EXIT_USAGE, console, errors, settings_or_exit

if TYPE_CHECKING:
    from workers.memory import HygieneReport
    from workers.memory.ports import MemoryStore

__all__ = ("audit", "hygiene", "reindex")


def hygiene(
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show what would change; change nothing.")
    ] = False,
    as_json: JsonOption = False,
    config: ConfigOption = None,
) -> None:
    """Apply the retention rules (workers.memory.retention in ditto.yaml): archive records
    of ruled categories neither edited nor used for archive_after_days, purge archived ones
    after purge_after_days, and trim the audit log to audit_days."""
    from ditto.app.bootstrap import build_retention
    from workers.memory import run_hygiene

    settings = settings_or_exit(config)
    policy = build_retention(settings)
    if not policy.categories and policy.audit_days is None:
        errors.print(
            "no retention rules: add workers.memory.retention.categories to ditto.yaml "
            "(core records are kept until deleted)"
        )

    async def run(store: MemoryStore) -> HygieneReport:
        with progress_bar() as progress:
            task = progress.add_task("hygiene", total=None)

            def advance(done: int, total: int) -> None:
                progress.update(task, completed=done, total=total)

            return await run_hygiene(store, policy, dry_run=dry_run, progress=advance)

    report = on_store(settings, run, maintaining=True)
    if as_json:
        print_json(report)
        return
    verb = "would" if report.dry_run else "did"
    table = Table(title=f"memory hygiene ({'dry run' if report.dry_run else 'applied'})")
    for column in ("action", "records", "ids"):
        table.add_column(column, overflow="fold")
    for action, ids in (
        ("archive", report.archived),
        ("purge", report.purged),
        ("delete expired", report.expired),
    ):
        table.add_row(action, str(len(ids)), escape(_listed(ids)))
    if report.skipped:
        skipped = escape(_listed(report.skipped))
        table.add_row("skipped (changed meanwhile)", str(len(report.skipped)), skipped)
    table.add_row("trim audit log", str(report.audit_purged), "")
    console.print(table)
    errors.print(
        f"hygiene {verb} archive {len(report.archived)}, purge {len(report.purged)}, delete "
        f"{len(report.expired)} expired records",
        highlight=False,
    )


def _listed(ids: list[str], shown: int = 5) -> str:
    more = f" … (+{len(ids) - shown})" if len(ids) > shown else ""
    return ", ".join(ids[:shown]) + more


def audit(
    principal: Annotated[str | None, typer.Option(help="Only this principal's entries.")] = None,
    after: Annotated[int, typer.Option(min=0, help="Entries after this sequence number.")] = 0,
    limit: Annotated[int, typer.Option(min=1, max=10_000, help="Most entries.")] = 100,
    as_json: JsonOption = False,
    config: ConfigOption = None,
) -> None:
    """Read the audit log (oldest first): who read or wrote which records, and the decision.
    Page with ``--after`` the last sequence number shown."""
    settings = settings_or_exit(config)
    if not settings.workers.memory.audit:
        errors.print("note: workers.memory.audit is off, so no new entries are being recorded")

    from workers.memory.ports import AuditLog, require

    async def read(store: MemoryStore) -> list[Any]:
        return await require(store, AuditLog).audit_log(
            after=after, limit=limit, principal=principal
        )

    entries = on_store(settings, read, reading=True)
    if as_json:
        print_json(entries)
        return
    table = Table(title=f"{len(entries)} audit entries")
    columns = ("seq", "at", "principal", "node", "decision", "records", "keys", "categories")
    for column in (*columns, "detail"):
        table.add_column(column, overflow="fold")
    for entry in entries:
        table.add_row(
            str(entry.seq),
            f"{entry.at:%Y-%m-%d %H:%M:%S}",
            escape(entry.principal or "-"),
            entry.node,
            _decision(entry.decision),
            escape(_listed(entry.ids, 3)),
            escape(_listed(entry.keys, 3)),
            escape(", ".join(sorted(set(entry.categories)))),
            escape(entry.detail or ""),
        )
    console.print(table)
    if len(entries) == limit:
        console.print(f"next page: --after {entries[-1].seq}", highlight=False)


def _decision(decision: str) -> str:
    colour = {"allow": "green", "deny": "red", "would-deny": "yellow", "failed": "magenta"}[
        decision
    ]
    return f"[{colour}]{decision}[/{colour}]"


def reindex(
    as_json: JsonOption = False,
    config: ConfigOption = None,
) -> None:
    """Embed every record with the configured embedder (``workers.memory.embedder``) and make
    its model the store's: needed after changing the model, or to give vectors to records
    written or imported without one. Resumable: run it again after an interruption."""
    from ditto.app.bootstrap import build_embedder
    from workers.memory.maintenance.reindex import ReindexReport
    from workers.memory.maintenance.reindex import reindex as run_reindex

    settings = settings_or_exit(config)
    embedder = build_embedder(settings)
    if embedder is None:
        errors.print("no embedder: set workers.memory.embedder.kind (hashing, minilm or e5-small)")
        raise typer.Exit(EXIT_USAGE)

    async def run(store: MemoryStore) -> ReindexReport:
        with progress_bar(rate="records") as progress:
            task = progress.add_task("embedding", total=None)

            def advance(done: int, total: int) -> None:
                progress.update(task, completed=done, total=total)

            return await run_reindex(store, embedder, progress=advance)

    report = on_store(settings, run, maintaining=True)
    if as_json:
        print_json(
            {
                "model": report.model.model_id,
                "dimension": report.model.dimension,
                "embedded": report.embedded,
            }
        )
        return
    console.print(
        f"vectors now of {report.model}: embedded {report.embedded} records", highlight=False
    )
