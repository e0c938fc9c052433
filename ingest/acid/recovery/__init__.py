"""File recovery: bring bucket files back to their last complete footer after a writer died
(Hive's `orcfiledump --recover`, docs/recovery.md), with backups of what is cut.
"""

from ingest.acid.recovery.recover import (
    FileRecovery,
    RecoveryReport,
    committed_read_length,
    default_backup_dir,
    recover_table,
    rollback_file,
)

__all__ = [
    "FileRecovery",
    "RecoveryReport",
    "committed_read_length",
    "default_backup_dir",
    "recover_table",
    "rollback_file",
]
