//! The catalog's connection to its database, SQLite or PostgreSQL, behind one small
//! API that the rest of the crate uses: statements with numbered parameters (`?1`),
//! rows read as values, and transactions that write.
//!
//! Statements are written once, in the SQL both databases share. For PostgreSQL a
//! statement's `?N` become `$N` ([`to_postgres`]), and the few statements whose
//! SQL differs are given in both forms ([`Conn::pick`]). A parameter is converted
//! to the type PostgreSQL expects of it (an `i64` to an `int4` column, say), and a
//! row's columns are read back as the same [`Value`]s SQLite gives.
//!
//! The API has the shape of `rusqlite`'s (`execute`, `query_row`, `prepare`,
//! `query_map`, `optional`), so that the catalog's statements read as SQL with
//! their parameters beside them. It is written here rather than taken from a crate
//! that speaks to several databases because those (`sqlx`'s `Any` driver) are
//! asynchronous and bring their own SQLite, where the catalog is called from the
//! engine's threads and keeps `rusqlite`'s bundled SQLite and its file format.
//!
//! A parameter is anything that gives a [`ValueRef`] ([`ToValue`]); a row is read
//! into owned [`Value`]s, and a column is taken out of it as any type that
//! [`FromValue`] converts to, with the same rules as `rusqlite`: an integer that
//! does not fit the type asked for, or a value of another kind, is an error that
//! names the column.

use postgres::types::IsNull;
pub use postgres::types::Type;
use std::cell::RefCell;
use std::collections::HashMap;

/// A value as the database stores it.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// SQL NULL.
    Null,
    /// A 64-bit integer.
    Int(i64),
    /// A double.
    Real(f64),
    /// UTF-8 text.
    Text(String),
    /// Bytes.
    Blob(Vec<u8>),
}

/// A parameter's value, borrowed from it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ValueRef<'a> {
    /// SQL NULL.
    Null,
    /// A 64-bit integer.
    Int(i64),
    /// A double.
    Real(f64),
    /// UTF-8 text.
    Text(&'a str),
    /// Bytes.
    Blob(&'a [u8]),
}

impl Value {
    fn kind(&self) -> &'static str {
        match self {
            Value::Null => "NULL",
            Value::Int(_) => "an integer",
            Value::Real(_) => "a real",
            Value::Text(_) => "text",
            Value::Blob(_) => "a blob",
        }
    }
}

/// Why a statement failed.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// SQLite's error.
    #[error("{0}")]
    Sqlite(#[from] rusqlite::Error),
    /// PostgreSQL's error (or its client's).
    #[error("{}", postgres_message(.0))]
    Postgres(#[from] postgres::Error),
    /// A query that must return a row returned none.
    #[error("the query returned no rows")]
    NoRows,
    /// TLS to PostgreSQL could not be set up (its root certificates).
    #[error(transparent)]
    Tls(Box<crate::tls::TlsError>),
    /// A column's value is not of the type asked for.
    #[error("column {column}: {why}")]
    Conversion {
        /// The column's index in the row.
        column: usize,
        /// What is wrong with its value.
        #[source]
        why: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
}

/// Result of a statement.
pub type Result<T> = std::result::Result<T, DbError>;

/// A column's value that is not of the type asked for.
#[derive(Debug, thiserror::Error)]
#[error("{found} is not {wanted}")]
struct WrongType {
    found: &'static str,
    wanted: &'static str,
}

impl DbError {
    /// A conversion error of column `column` for reason `why`.
    pub fn conversion(
        column: usize,
        why: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
    ) -> Self {
        DbError::Conversion {
            column,
            why: why.into(),
        }
    }

    /// The SQLite error code, when SQLite failed.
    pub fn sqlite_code(&self) -> Option<rusqlite::ffi::Error> {
        match self {
            DbError::Sqlite(e) => e.sqlite_error().copied(),
            _ => None,
        }
    }

    /// PostgreSQL's SQLSTATE, when PostgreSQL failed.
    pub fn postgres_code(&self) -> Option<&postgres::error::SqlState> {
        match self {
            DbError::Postgres(e) => e.code(),
            _ => None,
        }
    }
}

/// PostgreSQL's message with its detail, in one line.
fn postgres_message(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => match db.detail() {
            Some(d) => format!("{} ({d})", db.message()),
            None => db.message().to_string(),
        },
        None => e.to_string(),
    }
}

/// Something that can be a statement's parameter.
pub trait ToValue {
    /// Its value.
    fn value(&self) -> ValueRef<'_>;
}

/// A type a column's value can be read as.
pub trait FromValue: Sized {
    /// Reads `v`; an error says why it cannot be (the caller adds the column).
    fn from_value(v: &Value) -> std::result::Result<Self, BoxError>;
}

/// The reason a value cannot be read as a type.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

fn wrong(v: &Value, wanted: &'static str) -> BoxError {
    Box::new(WrongType {
        found: v.kind(),
        wanted,
    })
}

impl<T: ToValue + ?Sized> ToValue for &T {
    fn value(&self) -> ValueRef<'_> {
        (**self).value()
    }
}

impl<T: ToValue> ToValue for Option<T> {
    fn value(&self) -> ValueRef<'_> {
        match self {
            Some(v) => v.value(),
            None => ValueRef::Null,
        }
    }
}

impl ToValue for str {
    fn value(&self) -> ValueRef<'_> {
        ValueRef::Text(self)
    }
}

impl ToValue for String {
    fn value(&self) -> ValueRef<'_> {
        ValueRef::Text(self)
    }
}

impl ToValue for [u8] {
    fn value(&self) -> ValueRef<'_> {
        ValueRef::Blob(self)
    }
}

impl ToValue for Vec<u8> {
    fn value(&self) -> ValueRef<'_> {
        ValueRef::Blob(self)
    }
}

impl<const N: usize> ToValue for [u8; N] {
    fn value(&self) -> ValueRef<'_> {
        ValueRef::Blob(self)
    }
}

/// A `u64` is stored as the `i64` of the same bits, as the catalog has always
/// stored tags; the values the catalog keeps (blocks, bytes, counts) are far below
/// 2^63, where both are the same number.
impl ToValue for u64 {
    fn value(&self) -> ValueRef<'_> {
        ValueRef::Int(*self as i64)
    }
}

impl ToValue for f64 {
    fn value(&self) -> ValueRef<'_> {
        ValueRef::Real(*self)
    }
}

impl ToValue for bool {
    fn value(&self) -> ValueRef<'_> {
        ValueRef::Int(i64::from(*self))
    }
}

impl ToValue for Value {
    fn value(&self) -> ValueRef<'_> {
        match self {
            Value::Null => ValueRef::Null,
            Value::Int(i) => ValueRef::Int(*i),
            Value::Real(f) => ValueRef::Real(*f),
            Value::Text(s) => ValueRef::Text(s),
            Value::Blob(b) => ValueRef::Blob(b),
        }
    }
}

macro_rules! integers {
    ($($t:ty),*) => {$(
        impl ToValue for $t {
            fn value(&self) -> ValueRef<'_> {
                ValueRef::Int(i64::from(*self))
            }
        }

        impl FromValue for $t {
            fn from_value(v: &Value) -> std::result::Result<Self, BoxError> {
                match v {
                    Value::Int(i) => <$t>::try_from(*i).map_err(|e| Box::new(e) as BoxError),
                    _ => Err(wrong(v, "an integer")),
                }
            }
        }
    )*};
}

integers!(i64, i32, u32, u16, u8);

impl FromValue for bool {
    fn from_value(v: &Value) -> std::result::Result<Self, BoxError> {
        match v {
            Value::Int(i) => Ok(*i != 0),
            _ => Err(wrong(v, "an integer")),
        }
    }
}

impl FromValue for f64 {
    fn from_value(v: &Value) -> std::result::Result<Self, BoxError> {
        match v {
            Value::Real(f) => Ok(*f),
            Value::Int(i) => Ok(*i as f64),
            _ => Err(wrong(v, "a real")),
        }
    }
}

impl FromValue for String {
    fn from_value(v: &Value) -> std::result::Result<Self, BoxError> {
        match v {
            Value::Text(s) => Ok(s.clone()),
            _ => Err(wrong(v, "text")),
        }
    }
}

impl FromValue for Vec<u8> {
    fn from_value(v: &Value) -> std::result::Result<Self, BoxError> {
        match v {
            Value::Blob(b) => Ok(b.clone()),
            _ => Err(wrong(v, "a blob")),
        }
    }
}

impl<T: FromValue> FromValue for Option<T> {
    fn from_value(v: &Value) -> std::result::Result<Self, BoxError> {
        match v {
            Value::Null => Ok(None),
            v => T::from_value(v).map(Some),
        }
    }
}

impl FromValue for Value {
    fn from_value(v: &Value) -> std::result::Result<Self, BoxError> {
        Ok(v.clone())
    }
}

/// A text column read through `FromStr`-like parsing: the text, or an error.
pub(crate) fn text(v: &Value) -> std::result::Result<&str, BoxError> {
    match v {
        Value::Text(s) => Ok(s),
        _ => Err(wrong(v, "text")),
    }
}

/// The parameters of a statement, as `params![a, b]` makes them.
pub type Params<'a> = &'a [&'a dyn ToValue];

/// The parameters of a statement: `params![job, name]`.
macro_rules! params {
    () => { &[] as &[&dyn $crate::db::ToValue] };
    ($($p:expr),+ $(,)?) => { &[$(&$p as &dyn $crate::db::ToValue),+] as &[&dyn $crate::db::ToValue] };
}
pub(crate) use params;

/// One row of a query's answer.
#[derive(Debug, Clone)]
pub struct Row(Vec<Value>);

impl Row {
    /// Column `i` as a `T`.
    pub fn get<T: FromValue>(&self, i: usize) -> Result<T> {
        let v = self.0.get(i).ok_or_else(|| {
            DbError::conversion(i, format!("the row has {} columns", self.0.len()))
        })?;
        T::from_value(v).map_err(|why| DbError::Conversion { column: i, why })
    }
}

/// The rows of a query, taken one at a time with [`Rows::next`].
pub struct Rows {
    rows: std::vec::IntoIter<Row>,
    current: Option<Row>,
}

impl Rows {
    /// The next row, or none after the last.
    // A lending iterator: each row is borrowed until the next call, as rusqlite's.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<&Row>> {
        self.current = self.rows.next();
        Ok(self.current.as_ref())
    }
}

/// Turns "no rows" into `None`, as `rusqlite::OptionalExtension` does.
pub trait OptionalExtension<T> {
    /// `Ok(None)` for a query that returned no row.
    fn optional(self) -> Result<Option<T>>;
}

impl<T> OptionalExtension<T> for Result<T> {
    fn optional(self) -> Result<Option<T>> {
        match self {
            Ok(v) => Ok(Some(v)),
            Err(DbError::NoRows) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// A parameter handed to rusqlite, borrowed.
struct Sql<'a>(ValueRef<'a>);

impl rusqlite::ToSql for Sql<'_> {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, ValueRef as R};
        Ok(ToSqlOutput::Borrowed(match self.0 {
            ValueRef::Null => R::Null,
            ValueRef::Int(i) => R::Integer(i),
            ValueRef::Real(f) => R::Real(f),
            ValueRef::Text(s) => R::Text(s.as_bytes()),
            ValueRef::Blob(b) => R::Blob(b),
        }))
    }
}

fn sqlite_value(v: rusqlite::types::ValueRef<'_>, column: usize) -> Result<Value> {
    use rusqlite::types::ValueRef as R;
    Ok(match v {
        R::Null => Value::Null,
        R::Integer(i) => Value::Int(i),
        R::Real(f) => Value::Real(f),
        R::Text(t) => {
            Value::Text(String::from_utf8(t.to_vec()).map_err(|e| DbError::conversion(column, e))?)
        }
        R::Blob(b) => Value::Blob(b.to_vec()),
    })
}

/// `params` as rusqlite takes them, borrowed.
fn sqlite_params<'a>(params: Params<'a>) -> Vec<Sql<'a>> {
    params.iter().map(|p| Sql(p.value())).collect()
}

/// At most `limit` rows of a query on SQLite.
fn sqlite_rows(
    c: &rusqlite::Connection,
    sql: &str,
    params: Params<'_>,
    limit: usize,
) -> Result<Vec<Row>> {
    let mut st = c.prepare_cached(sql)?;
    let n = st.column_count();
    let bound = sqlite_params(params);
    let mut rows = st.query(rusqlite::params_from_iter(bound.iter()))?;
    let mut out = Vec::new();
    while out.len() < limit {
        match rows.next()? {
            Some(r) => out.push(sqlite_row(r, n)?),
            None => break,
        }
    }
    Ok(out)
}

fn sqlite_row(r: &rusqlite::Row<'_>, n: usize) -> Result<Row> {
    let mut vals = Vec::with_capacity(n);
    for i in 0..n {
        vals.push(sqlite_value(r.get_ref(i)?, i)?);
    }
    Ok(Row(vals))
}

/// Which database a connection speaks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// SQLite, the embedded default.
    Sqlite,
    /// PostgreSQL, a site's shared catalog.
    Postgres,
}

/// A PostgreSQL client, what it connected with, and the statements it has
/// prepared, by their text.
struct Pg {
    client: postgres::Client,
    config: postgres::Config,
    /// TLS, as the URL's `sslmode` asks (`crate::tls`).
    tls: crate::tls::Connector,
    prepared: HashMap<String, postgres::Statement>,
}

impl Pg {
    /// Runs `op`; when the connection was lost (PostgreSQL restarted, or its host
    /// failed over) and no transaction is open, connects again to the same URL
    /// and runs it once more. Inside a transaction the loss is the error: what
    /// the transaction wrote is gone with the connection.
    fn again<T>(&mut self, in_tx: bool, mut op: impl FnMut(&mut Pg) -> Result<T>) -> Result<T> {
        if self.client.is_closed() && !in_tx {
            self.reconnect()?;
        }
        match op(self) {
            Err(DbError::Postgres(e)) if e.is_closed() && !in_tx => {
                self.reconnect()?;
                op(self)
            }
            r => r,
        }
    }

    fn reconnect(&mut self) -> Result<()> {
        self.client = self.config.connect(self.tls.clone())?;
        self.prepared.clear();
        Ok(())
    }

    fn statement(&mut self, sql: &str) -> Result<postgres::Statement> {
        if let Some(st) = self.prepared.get(sql) {
            return Ok(st.clone());
        }
        let st = self.client.prepare(&to_postgres(sql))?;
        self.prepared.insert(sql.to_string(), st.clone());
        Ok(st)
    }

    fn execute(&mut self, sql: &str, params: Params<'_>) -> Result<usize> {
        let st = self.statement(sql)?;
        let args = pg_args(params);
        let refs = pg_refs(&args);
        Ok(self.client.execute(&st, &refs)? as usize)
    }

    fn query_all(&mut self, sql: &str, params: Params<'_>) -> Result<Vec<Row>> {
        let st = self.statement(sql)?;
        let args = pg_args(params);
        let refs = pg_refs(&args);
        let rows = self.client.query(&st, &refs)?;
        rows.iter().map(pg_row).collect()
    }
}

enum Backend {
    Sqlite(rusqlite::Connection),
    Postgres(Box<RefCell<Pg>>),
}

/// A connection to the catalog's database.
pub struct Conn {
    backend: Backend,
    /// How deep transactions are open: only the outermost begins and commits.
    depth: RefCell<u32>,
}

impl Conn {
    /// A connection to the SQLite database `conn`.
    pub fn sqlite(conn: rusqlite::Connection) -> Self {
        Conn {
            backend: Backend::Sqlite(conn),
            depth: RefCell::new(0),
        }
    }

    /// A connection to PostgreSQL through `client`, made with `config` (with
    /// which it connects again when the connection is lost).
    pub fn postgres(
        client: postgres::Client,
        config: postgres::Config,
        tls: crate::tls::Connector,
    ) -> Self {
        Conn {
            backend: Backend::Postgres(Box::new(RefCell::new(Pg {
                client,
                config,
                tls,
                prepared: HashMap::new(),
            }))),
            depth: RefCell::new(0),
        }
    }

    /// Which database this is.
    pub fn dialect(&self) -> Dialect {
        match self.backend {
            Backend::Sqlite(_) => Dialect::Sqlite,
            Backend::Postgres(_) => Dialect::Postgres,
        }
    }

    /// The form of a statement for this database: `sqlite` or `postgres`.
    pub fn pick<'a>(&self, sqlite: &'a str, postgres: &'a str) -> &'a str {
        match self.dialect() {
            Dialect::Sqlite => sqlite,
            Dialect::Postgres => postgres,
        }
    }

    /// The SQLite connection, for what only SQLite has (its pragmas, its schema's
    /// history); none on PostgreSQL.
    pub fn as_sqlite(&self) -> Option<&rusqlite::Connection> {
        match &self.backend {
            Backend::Sqlite(c) => Some(c),
            Backend::Postgres(_) => None,
        }
    }

    fn pg(pg: &RefCell<Pg>) -> Result<std::cell::RefMut<'_, Pg>> {
        // A statement never runs inside another's row callback, so the client is
        // free whenever a statement starts; a nested borrow would be a bug here.
        pg.try_borrow_mut()
            .map_err(|_| DbError::conversion(0, "a statement ran inside another"))
    }

    /// Runs a statement that returns no rows; the number of rows it changed.
    #[track_caller]
    pub fn execute(&self, sql: &str, params: Params<'_>) -> Result<usize> {
        self.note_ran(std::panic::Location::caller());
        match &self.backend {
            Backend::Sqlite(c) => {
                let mut st = c.prepare_cached(sql)?;
                let bound = sqlite_params(params);
                Ok(st.execute(rusqlite::params_from_iter(bound.iter()))?)
            }
            Backend::Postgres(pg) => {
                let in_tx = self.in_tx();
                Self::pg(pg)?.again(in_tx, |p| p.execute(sql, params))
            }
        }
    }

    /// Runs statements separated by `;`, without parameters.
    #[track_caller]
    pub fn execute_batch(&self, sql: &str) -> Result<()> {
        self.note_ran(std::panic::Location::caller());
        match &self.backend {
            Backend::Sqlite(c) => Ok(c.execute_batch(sql)?),
            Backend::Postgres(pg) => {
                let in_tx = self.in_tx();
                Self::pg(pg)?.again(in_tx, |p| Ok(p.client.batch_execute(sql)?))
            }
        }
    }

    /// The rows of a query.
    #[track_caller]
    pub fn query_all(&self, sql: &str, params: Params<'_>) -> Result<Vec<Row>> {
        self.note_ran(std::panic::Location::caller());
        match &self.backend {
            Backend::Sqlite(c) => sqlite_rows(c, sql, params, usize::MAX),
            Backend::Postgres(pg) => {
                let in_tx = self.in_tx();
                Self::pg(pg)?.again(in_tx, |p| p.query_all(sql, params))
            }
        }
    }

    /// The first row of a query, read by `f`; [`DbError::NoRows`] when there is none.
    #[track_caller]
    pub fn query_row<T>(
        &self,
        sql: &str,
        params: Params<'_>,
        f: impl FnOnce(&Row) -> Result<T>,
    ) -> Result<T> {
        match &self.backend {
            Backend::Sqlite(c) => match sqlite_rows(c, sql, params, 1)?.first() {
                Some(r) => f(r),
                None => Err(DbError::NoRows),
            },
            Backend::Postgres(_) => match self.query_all(sql, params)?.first() {
                Some(r) => f(r),
                None => Err(DbError::NoRows),
            },
        }
    }

    /// Copies `rows` into `columns` of `table` with PostgreSQL's `COPY` in its
    /// binary form, each value as the column's type in `types`: the fast way in
    /// for many rows. The number of rows copied; an error on SQLite, which has no
    /// `COPY` (its inserts are fast as they are).
    #[track_caller]
    pub fn copy_in(
        &self,
        table: &str,
        columns: &[&str],
        types: &[Type],
        rows: &[Vec<Value>],
    ) -> Result<u64> {
        self.note_ran(std::panic::Location::caller());
        let Backend::Postgres(pg) = &self.backend else {
            return Err(DbError::conversion(0, "COPY is PostgreSQL's"));
        };
        let mut pg = Self::pg(pg)?;
        let sql = format!(
            "COPY {table} ({}) FROM STDIN (FORMAT binary)",
            columns.join(", ")
        );
        let sink = pg.client.copy_in(&sql)?;
        let mut w = postgres::binary_copy::BinaryCopyInWriter::new(sink, types);
        for r in rows {
            let args: Vec<PgArg> = r.iter().cloned().map(PgArg).collect();
            w.write(&pg_refs(&args))?;
        }
        Ok(w.finish()?)
    }

    /// A statement to run (once or many times).
    pub fn prepare(&self, sql: &str) -> Result<Stmt<'_>> {
        Ok(Stmt {
            conn: self,
            sql: sql.to_string(),
            bound: Vec::new(),
        })
    }

    /// The same as [`Conn::prepare`]: every statement is cached by its text.
    pub fn prepare_cached(&self, sql: &str) -> Result<Stmt<'_>> {
        self.prepare(sql)
    }

    /// Begins a transaction that writes. On SQLite it takes the write lock at once
    /// (`BEGIN IMMEDIATE`), waiting for it under the busy timeout; on PostgreSQL
    /// rows are locked as they are written. A transaction begun inside another is
    /// part of it.
    pub fn write_tx(&self) -> Result<Tx<'_>> {
        let outer = *self.depth.borrow() == 0;
        if outer {
            self.execute_batch(self.pick("BEGIN IMMEDIATE", "BEGIN"))?;
        }
        *self.depth.borrow_mut() += 1;
        Ok(Tx {
            conn: self,
            outer,
            done: false,
        })
    }

    /// Notes that the statement at `at` (its call site in this crate) ran on
    /// PostgreSQL: with the cargo feature `statement-log`, in the file that
    /// `TAPELOOM_TEST_PG_STATEMENTS` names, once per call site and process. The
    /// test command checks that every statement of the crate ran there.
    #[inline]
    fn note_ran(&self, at: &'static std::panic::Location<'static>) {
        #[cfg(feature = "statement-log")]
        if self.dialect() == Dialect::Postgres {
            ran::note(at);
        }
        let _ = at;
    }

    /// Whether a transaction is open (begun by [`Conn::write_tx`]).
    fn in_tx(&self) -> bool {
        *self.depth.borrow() > 0
    }

    fn in_transaction(&self) -> bool {
        match &self.backend {
            Backend::Sqlite(c) => !c.is_autocommit(),
            // PostgreSQL ends a transaction whose COMMIT failed.
            Backend::Postgres(_) => false,
        }
    }

    fn end_tx(&self, outer: bool, commit: bool) -> Result<()> {
        if !outer {
            *self.depth.borrow_mut() -= 1;
            return Ok(());
        }
        // Still counted as open while it ends: a COMMIT on a lost connection is
        // an error, never sent again on a new one (where it would commit nothing).
        let sql = if commit { "COMMIT" } else { "ROLLBACK" };
        let r = self.execute_batch(sql);
        if r.is_err() && commit && self.in_transaction() {
            // A failed COMMIT can leave the transaction open: end it, so that
            // the connection can begin the next one.
            let _ = self.execute_batch("ROLLBACK");
        }
        *self.depth.borrow_mut() -= 1;
        r
    }
}

/// A transaction that writes; rolled back when dropped without [`Tx::commit`].
pub struct Tx<'a> {
    conn: &'a Conn,
    outer: bool,
    done: bool,
}

impl Tx<'_> {
    /// Commits the transaction (the outermost one; an inner one ends with it).
    pub fn commit(mut self) -> Result<()> {
        self.done = true;
        self.conn.end_tx(self.outer, true)
    }
}

impl std::ops::Deref for Tx<'_> {
    type Target = Conn;
    fn deref(&self) -> &Conn {
        self.conn
    }
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.conn.end_tx(self.outer, false);
        }
    }
}

/// A statement and the parameters bound to it so far.
pub struct Stmt<'a> {
    conn: &'a Conn,
    sql: String,
    bound: Vec<Value>,
}

impl Stmt<'_> {
    /// Runs the statement with `params`; the number of rows it changed.
    #[track_caller]
    pub fn execute(&mut self, params: Params<'_>) -> Result<usize> {
        self.conn.execute(&self.sql, params)
    }

    /// The rows of the statement with `params`, each read by `f`.
    #[track_caller]
    pub fn query_map<T>(
        &mut self,
        params: Params<'_>,
        mut f: impl FnMut(&Row) -> Result<T>,
    ) -> Result<std::vec::IntoIter<Result<T>>> {
        let rows = self.conn.query_all(&self.sql, params)?;
        let out: Vec<Result<T>> = rows.iter().map(&mut f).collect();
        Ok(out.into_iter())
    }

    /// The rows of the statement with `params`.
    #[track_caller]
    pub fn query(&mut self, params: Params<'_>) -> Result<Rows> {
        let rows = self.conn.query_all(&self.sql, params)?;
        Ok(Rows {
            rows: rows.into_iter(),
            current: None,
        })
    }

    /// Binds parameter `i` (from 1) for [`Stmt::raw_execute`].
    pub fn raw_bind_parameter(&mut self, i: usize, v: impl ToValue) -> Result<()> {
        if i == 0 {
            return Err(DbError::conversion(0, "parameters are numbered from 1"));
        }
        if self.bound.len() < i {
            self.bound.resize(i, Value::Null);
        }
        self.bound[i - 1] = owned(v.value());
        Ok(())
    }

    /// Runs the statement with the parameters bound; they are then cleared.
    #[track_caller]
    pub fn raw_execute(&mut self) -> Result<usize> {
        let bound = std::mem::take(&mut self.bound);
        let refs: Vec<&dyn ToValue> = bound.iter().map(|v| v as &dyn ToValue).collect();
        self.conn.execute(&self.sql, &refs)
    }
}

fn owned(v: ValueRef<'_>) -> Value {
    match v {
        ValueRef::Null => Value::Null,
        ValueRef::Int(i) => Value::Int(i),
        ValueRef::Real(f) => Value::Real(f),
        ValueRef::Text(s) => Value::Text(s.to_string()),
        ValueRef::Blob(b) => Value::Blob(b.to_vec()),
    }
}

/// `?N` parameters as PostgreSQL's `$N`, outside quoted strings.
pub fn to_postgres(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut quoted = false;
    for c in sql.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                out.push(c);
            }
            '?' if !quoted => out.push('$'),
            _ => out.push(c),
        }
    }
    out
}

/// A parameter handed to PostgreSQL, converted to the type its place expects.
#[derive(Debug)]
struct PgArg(Value);

fn pg_args(params: Params<'_>) -> Vec<PgArg> {
    params.iter().map(|p| PgArg(owned(p.value()))).collect()
}

fn pg_refs(args: &[PgArg]) -> Vec<&(dyn postgres::types::ToSql + Sync)> {
    args.iter()
        .map(|a| a as &(dyn postgres::types::ToSql + Sync))
        .collect()
}

impl postgres::types::ToSql for PgArg {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut bytes::BytesMut,
    ) -> std::result::Result<IsNull, BoxError> {
        match &self.0 {
            Value::Null => Ok(IsNull::Yes),
            Value::Int(i) => match *ty {
                Type::INT8 => i.to_sql(ty, out),
                Type::INT4 => i32::try_from(*i)?.to_sql(ty, out),
                Type::INT2 => i16::try_from(*i)?.to_sql(ty, out),
                Type::BOOL => (*i != 0).to_sql(ty, out),
                Type::FLOAT8 => (*i as f64).to_sql(ty, out),
                Type::FLOAT4 => (*i as f32).to_sql(ty, out),
                Type::TEXT | Type::VARCHAR => i.to_string().to_sql(ty, out),
                _ => Err(format!("an integer cannot be a parameter of type {ty}").into()),
            },
            Value::Real(f) => match *ty {
                Type::FLOAT8 => f.to_sql(ty, out),
                Type::FLOAT4 => (*f as f32).to_sql(ty, out),
                _ => Err(format!("a real cannot be a parameter of type {ty}").into()),
            },
            Value::Text(t) => t.as_str().to_sql(ty, out),
            Value::Blob(b) => b.as_slice().to_sql(ty, out),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    postgres::types::to_sql_checked!();
}

fn pg_value(r: &postgres::Row, i: usize) -> Result<Value> {
    let col = &r.columns()[i];
    let v = match *col.type_() {
        Type::INT8 => r.try_get::<_, Option<i64>>(i)?.map(Value::Int),
        Type::INT4 => r
            .try_get::<_, Option<i32>>(i)?
            .map(|v| Value::Int(v.into())),
        Type::INT2 => r
            .try_get::<_, Option<i16>>(i)?
            .map(|v| Value::Int(v.into())),
        Type::BOOL => r
            .try_get::<_, Option<bool>>(i)?
            .map(|v| Value::Int(v.into())),
        Type::FLOAT8 => r.try_get::<_, Option<f64>>(i)?.map(Value::Real),
        Type::FLOAT4 => r
            .try_get::<_, Option<f32>>(i)?
            .map(|v| Value::Real(v.into())),
        Type::TEXT | Type::VARCHAR | Type::NAME | Type::BPCHAR => {
            r.try_get::<_, Option<String>>(i)?.map(Value::Text)
        }
        Type::BYTEA => r.try_get::<_, Option<Vec<u8>>>(i)?.map(Value::Blob),
        ref t => {
            return Err(DbError::conversion(
                i,
                format!(
                    "column {} has type {t}, which the catalog does not read",
                    col.name()
                ),
            ))
        }
    };
    Ok(v.unwrap_or(Value::Null))
}

fn pg_row(r: &postgres::Row) -> Result<Row> {
    (0..r.len())
        .map(|i| pg_value(r, i))
        .collect::<Result<Vec<_>>>()
        .map(Row)
}

/// The call sites of the statements run on PostgreSQL, written to the file
/// `TAPELOOM_TEST_PG_STATEMENTS` names (the cargo feature `statement-log`).
#[cfg(feature = "statement-log")]
mod ran {
    use std::collections::HashSet;
    use std::io::Write;
    use std::sync::{Mutex, OnceLock};

    static SEEN: OnceLock<Mutex<HashSet<(&'static str, u32)>>> = OnceLock::new();

    /// Appends `at` as `FILE:LINE` on a line of its own, the first time.
    pub(super) fn note(at: &'static std::panic::Location<'static>) {
        let Some(path) = std::env::var_os("TAPELOOM_TEST_PG_STATEMENTS") else {
            return;
        };
        let seen = SEEN.get_or_init(Mutex::default);
        let new = seen
            .lock()
            .map(|mut s| s.insert((at.file(), at.line())))
            .unwrap_or(false);
        if !new {
            return;
        }
        // One short write with O_APPEND: processes that note at once do not
        // interleave their lines.
        let line = format!("{}:{}\n", at.file(), at.line());
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = f.write_all(line.as_bytes());
        }
    }
}
