"""Alembic environment of the specsweep results store. Run through `specsweep db upgrade` (or any Store
open), which passes the connection in `config.attributes["connection"]`.

Own version table (`specsweep_alembic_version`): Optuna keeps its own `alembic_version` in the same
database. Autogenerate only looks at specsweep's tables (Optuna's are excluded by name)."""

from alembic import context

from orchestrator.store.schema import metadata

OPTUNA_TABLES = {"studies", "study_directions", "study_user_attributes", "study_system_attributes", "trials",
                 "trial_user_attributes", "trial_system_attributes", "trial_params", "trial_values",
                 "trial_intermediate_values", "trial_heartbeats", "version_info", "alembic_version"}
VERSION_TABLE = "specsweep_alembic_version"


def include_object(obj, name, type_, reflected, compare_to):
    if type_ == "table" and (name in OPTUNA_TABLES or name == VERSION_TABLE):
        return False
    return True


def run_migrations_online() -> None:
    connection = context.config.attributes["connection"]
    context.configure(connection=connection, target_metadata=metadata, version_table=VERSION_TABLE,
                      include_object=include_object, render_as_batch=connection.dialect.name == "sqlite")
    with context.begin_transaction():
        context.run_migrations()


run_migrations_online()
