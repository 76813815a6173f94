"""The MySQL / MariaDB memory store, written against the SQL driver port (the ``mysql`` extra:
asyncmy, or bring your own driver)."""

from workers.memory.stores.mysql.store import MysqlMemoryStore

__all__ = ("MysqlMemoryStore",)
