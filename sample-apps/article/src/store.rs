//! The article collection's storage: SQLite through rusqlite (bundled, so
//! no system library), in a file (`[apps.article.settings] db = "PATH"`,
//! which survives hot replaces and restarts) or in memory (no `db`: the
//! data lives as long as the generation).
//!
//! A file is opened per operation, under an exclusive `flock` of the
//! sidecar file `PATH.lock`, and closed before the lock is released. Each
//! generation of the app links its own copy of SQLite, and SQLite's POSIX
//! locks cannot tell two copies in one process apart (nor survive one of
//! them closing the file): the `flock` of a separately opened file does,
//! so the old and new generations never have the database open at once.

use rusqlite::{Connection, OptionalExtension};
use serde::Serialize;
use std::fs::File;
use std::path::PathBuf;
use std::sync::Mutex;

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS items (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL UNIQUE,
    body TEXT NOT NULL
)";

/// One item of the collection.
#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct Item {
    pub id: i64,
    pub name: String,
    pub body: String,
}

/// Why an operation failed.
#[derive(Debug)]
pub enum StoreError {
    /// Another item has this name.
    Conflict,
    /// Anything else (logged; the client gets 500).
    Failed(String),
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::ConstraintViolation) => StoreError::Conflict,
            _ => StoreError::Failed(e.to_string()),
        }
    }
}

impl From<std::io::Error> for StoreError {
    fn from(e: std::io::Error) -> Self {
        StoreError::Failed(e.to_string())
    }
}

enum Target {
    Memory(Mutex<Connection>),
    File { db: PathBuf, lock: PathBuf },
}

/// Where the items are kept.
pub struct Store {
    target: Target,
}

impl Store {
    /// The store in `db` (created with its table if new), or in memory.
    pub fn open(db: Option<&str>) -> Result<Self, StoreError> {
        let target = match db {
            None => Target::Memory(Mutex::new(Connection::open_in_memory()?)),
            Some(path) => Target::File {
                db: PathBuf::from(path),
                lock: PathBuf::from(format!("{path}.lock")),
            },
        };
        let store = Store { target };
        store.with(|c| c.execute_batch(SCHEMA))?;
        Ok(store)
    }

    /// Runs `f` on a connection to the database (see the module's docs).
    fn with<T>(&self, f: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> Result<T, StoreError> {
        match &self.target {
            Target::Memory(conn) => {
                let conn = conn.lock().unwrap_or_else(|p| p.into_inner());
                Ok(f(&conn)?)
            }
            Target::File { db, lock } => {
                let lock = File::options()
                    .create(true)
                    .truncate(false)
                    .write(true)
                    .open(lock)?;
                rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive)
                    .map_err(std::io::Error::from)?;
                let conn = Connection::open(db)?;
                let out = f(&conn);
                drop(conn);
                // Dropping `lock` closes it, which releases the flock.
                Ok(out?)
            }
        }
    }

    pub fn list(&self) -> Result<Vec<Item>, StoreError> {
        self.with(|c| {
            let mut statement = c.prepare("SELECT id, name, body FROM items ORDER BY id")?;
            let rows = statement.query_map([], row_item)?;
            rows.collect()
        })
    }

    pub fn get(&self, id: i64) -> Result<Option<Item>, StoreError> {
        self.with(|c| {
            c.query_row(
                "SELECT id, name, body FROM items WHERE id = ?1",
                [id],
                row_item,
            )
            .optional()
        })
    }

    pub fn create(&self, name: &str, body: &str) -> Result<Item, StoreError> {
        self.with(|c| {
            c.execute(
                "INSERT INTO items (name, body) VALUES (?1, ?2)",
                [name, body],
            )?;
            Ok(Item {
                id: c.last_insert_rowid(),
                name: name.to_string(),
                body: body.to_string(),
            })
        })
    }

    /// The updated item; `None` if there is no item `id`.
    pub fn update(&self, id: i64, name: &str, body: &str) -> Result<Option<Item>, StoreError> {
        self.with(|c| {
            let changed = c.execute(
                "UPDATE items SET name = ?1, body = ?2 WHERE id = ?3",
                rusqlite::params![name, body, id],
            )?;
            Ok((changed > 0).then(|| Item {
                id,
                name: name.to_string(),
                body: body.to_string(),
            }))
        })
    }

    /// True if item `id` was there.
    pub fn delete(&self, id: i64) -> Result<bool, StoreError> {
        self.with(|c| Ok(c.execute("DELETE FROM items WHERE id = ?1", [id])? > 0))
    }
}

fn row_item(row: &rusqlite::Row<'_>) -> rusqlite::Result<Item> {
    Ok(Item {
        id: row.get(0)?,
        name: row.get(1)?,
        body: row.get(2)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crud_in_memory_and_a_name_conflict() {
        let store = Store::open(None).unwrap();
        let a = store.create("a", "first").unwrap();
        assert_eq!(store.get(a.id).unwrap(), Some(a.clone()));
        assert!(matches!(
            store.create("a", "again"),
            Err(StoreError::Conflict)
        ));
        let b = store.create("b", "second").unwrap();
        assert_eq!(store.list().unwrap(), vec![a.clone(), b.clone()]);
        let a2 = store.update(a.id, "a2", "changed").unwrap().unwrap();
        assert_eq!(store.get(a.id).unwrap(), Some(a2));
        assert!(matches!(
            store.update(a.id, "b", "x"),
            Err(StoreError::Conflict)
        ));
        assert!(store.delete(a.id).unwrap());
        assert!(!store.delete(a.id).unwrap());
        assert_eq!(store.update(a.id, "z", "z").unwrap(), None);
    }

    #[test]
    fn a_file_keeps_the_items() {
        let dir = std::env::temp_dir().join(format!("article-store-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let db = dir.join("items.db").display().to_string();
        let id = Store::open(Some(&db))
            .unwrap()
            .create("kept", "yes")
            .unwrap()
            .id;
        let again = Store::open(Some(&db)).unwrap();
        assert_eq!(
            again.get(id).unwrap().map(|i| i.name),
            Some("kept".to_string())
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
