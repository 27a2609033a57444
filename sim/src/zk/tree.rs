//! ZooKeeper's data tree (`DataTree` 3.8): nodes with their Stat and children, the
//! ephemeral nodes of each session, and the transactions that change them.
//!
//! Changes come only as [`Txn`]s through [`DataTree::apply`], the one write path: a
//! standalone server applies each txn as it is made, and a server of an ensemble
//! applies the same txns, in zxid order, once a quorum committed them. Applying
//! returns the watch triggers (`dataWatches`/`childWatches.triggerWatch`) the server
//! turns into notifications; the tree itself knows nothing of connections.

use std::collections::{BTreeMap, BTreeSet};

use lock_impl::zk::proto::{ErrorCode, EventType, Stat};

use super::java::JavaHashSet;

/// One node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// Its data (`None`: created with null data).
    pub data: Option<Vec<u8>>,
    /// Its persisted Stat (`dataLength` and `numChildren` are derived on read).
    pub stat: Stat,
    /// Its children's names, in Java's `HashSet` order.
    pub children: JavaHashSet,
}

impl Node {
    /// The Stat as the wire carries it (`DataNode.copyStat`): the persisted
    /// `cversion` counts creates (it names sequential children); the client sees
    /// `2 × creates − children`, the count of creates and deletes.
    pub fn wire_stat(&self) -> Stat {
        let children = self.children.len() as i32;
        Stat {
            data_length: self.data.as_ref().map_or(0, |d| d.len() as i32),
            num_children: children,
            cversion: self.stat.cversion.wrapping_mul(2).wrapping_sub(children),
            ..self.stat
        }
    }
}

/// A change to the tree, as the txn log records it (serializable: an ensemble's
/// servers send txns to each other).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum TxnBody {
    /// A session was created.
    CreateSession {
        /// Its negotiated timeout.
        timeout_ms: u32,
    },
    /// A session ended (closed or expired): its ephemeral nodes go.
    CloseSession,
    /// A node was created.
    Create {
        /// Its full path (with a sequential suffix).
        path: String,
        /// Its data.
        data: Option<Vec<u8>>,
        /// Its owner session, 0 for a persistent node.
        ephemeral_owner: i64,
        /// The parent's `cversion` after this create.
        parent_cversion: i32,
    },
    /// A node was deleted.
    Delete {
        /// Its path.
        path: String,
    },
    /// A node's data was replaced.
    SetData {
        /// Its path.
        path: String,
        /// The new data.
        data: Option<Vec<u8>>,
        /// Its new version.
        version: i32,
    },
    /// A `check` of a `multi` (changes nothing).
    Check {
        /// Its path.
        path: String,
    },
    /// A `multi`: every sub-txn, or (if one failed) an error per op.
    Multi(Vec<TxnBody>),
    /// A write that failed its checks: it still takes a zxid, as in ZooKeeper.
    Error(#[serde(with = "error_code")] ErrorCode),
}

/// `ErrorCode` as its number.
mod error_code {
    use lock_impl::zk::proto::ErrorCode;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(code: &ErrorCode, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_i32(code.0)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<ErrorCode, D::Error> {
        i32::deserialize(d).map(ErrorCode)
    }
}

/// One entry of the txn log: the seam an ensemble replicates.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Txn {
    /// Its zxid.
    pub zxid: i64,
    /// The leader's wall clock when it was made, ms (ctime/mtime).
    pub time_ms: i64,
    /// The session that asked for it.
    pub session_id: i64,
    /// What it changes.
    pub body: TxnBody,
}

/// Which watch table a trigger reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchTable {
    /// `dataWatches` (set by `exists` and `getData`).
    Data,
    /// `childWatches` (set by `getChildren`).
    Child,
}

/// A watch trigger: fire `event` at the watchers of `path` in `table` (and remove
/// them). `suppress_previous`: skip watchers the previous trigger already told (a
/// delete tells a connection with both watches once).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trigger {
    /// The table.
    pub table: WatchTable,
    /// The node.
    pub path: String,
    /// The event.
    pub event: EventType,
    /// Skip watchers of the trigger just before.
    pub suppress_previous: bool,
}

/// The data tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataTree {
    nodes: BTreeMap<String, Node>,
    ephemerals: BTreeMap<i64, BTreeSet<String>>,
    last_zxid: i64,
}

/// The parent of `path` as ZooKeeper names it (`/a/b` → `/a`, `/a` → `/`).
pub fn parent_of(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

fn child_name(path: &str) -> &str {
    path.rfind('/').map_or(path, |i| &path[i + 1..])
}

impl Default for DataTree {
    fn default() -> Self {
        Self::new()
    }
}

impl DataTree {
    /// The tree every server starts with: `/`, `/zookeeper`, `/zookeeper/quota` and
    /// `/zookeeper/config`, every Stat zero.
    pub fn new() -> Self {
        let mut t = Self {
            nodes: BTreeMap::new(),
            ephemerals: BTreeMap::new(),
            last_zxid: 0,
        };
        for (path, children) in [
            ("/", &["zookeeper"][..]),
            ("/zookeeper", &["quota", "config"][..]),
            ("/zookeeper/quota", &[][..]),
            ("/zookeeper/config", &[][..]),
        ] {
            let mut set = JavaHashSet::new();
            for c in children {
                set.insert((*c).to_string());
            }
            t.nodes.insert(
                path.to_string(),
                Node {
                    data: Some(Vec::new()),
                    stat: Stat::default(),
                    children: set,
                },
            );
        }
        t
    }

    /// The node at `path` (`""` is the root too, as in `DataTree.nodes`).
    pub fn get(&self, path: &str) -> Option<&Node> {
        self.nodes.get(if path.is_empty() { "/" } else { path })
    }

    /// The last applied zxid.
    pub fn last_zxid(&self) -> i64 {
        self.last_zxid
    }

    /// The ephemeral nodes of `session`.
    pub fn ephemerals(&self, session: i64) -> Vec<String> {
        self.ephemerals
            .get(&session)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Every node's path, sorted.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.nodes.keys().map(String::as_str)
    }

    /// Applies one txn (the only way the tree changes) and returns the watch
    /// triggers it causes, in ZooKeeper's order.
    pub fn apply(&mut self, txn: &Txn) -> Vec<Trigger> {
        let mut triggers = Vec::new();
        self.apply_body(
            &txn.body,
            txn.zxid,
            txn.time_ms,
            txn.session_id,
            &mut triggers,
        );
        if txn.zxid > self.last_zxid {
            self.last_zxid = txn.zxid;
        }
        triggers
    }

    fn apply_body(
        &mut self,
        body: &TxnBody,
        zxid: i64,
        time_ms: i64,
        session: i64,
        triggers: &mut Vec<Trigger>,
    ) {
        match body {
            TxnBody::CreateSession { .. } | TxnBody::Check { .. } | TxnBody::Error(_) => {}
            TxnBody::CloseSession => {
                for path in self.ephemerals(session) {
                    self.delete_node(&path, zxid, triggers);
                }
                self.ephemerals.remove(&session);
            }
            TxnBody::Create {
                path,
                data,
                ephemeral_owner,
                parent_cversion,
            } => self.create_node(
                path,
                data.clone(),
                *ephemeral_owner,
                *parent_cversion,
                zxid,
                time_ms,
                triggers,
            ),
            TxnBody::Delete { path } => self.delete_node(path, zxid, triggers),
            TxnBody::SetData {
                path,
                data,
                version,
            } => {
                if let Some(n) = self.nodes.get_mut(path) {
                    n.data = data.clone();
                    n.stat.version = *version;
                    n.stat.mzxid = zxid;
                    n.stat.mtime = time_ms;
                    triggers.push(Trigger {
                        table: WatchTable::Data,
                        path: path.clone(),
                        event: EventType::NodeDataChanged,
                        suppress_previous: false,
                    });
                }
            }
            TxnBody::Multi(subs) => {
                for sub in subs {
                    self.apply_body(sub, zxid, time_ms, session, triggers);
                }
            }
        }
    }

    /// `DataTree.createNode`.
    #[allow(clippy::too_many_arguments)]
    fn create_node(
        &mut self,
        path: &str,
        data: Option<Vec<u8>>,
        ephemeral_owner: i64,
        parent_cversion: i32,
        zxid: i64,
        time_ms: i64,
        triggers: &mut Vec<Trigger>,
    ) {
        let parent_path = parent_of(path).to_string();
        let name = child_name(path).to_string();
        let Some(parent) = self.nodes.get_mut(&parent_path) else {
            return;
        };
        if parent.children.contains(&name) {
            return;
        }
        if parent_cversion > parent.stat.cversion {
            parent.stat.cversion = parent_cversion;
            parent.stat.pzxid = zxid;
        }
        parent.children.insert(name);
        self.nodes.insert(
            path.to_string(),
            Node {
                data,
                stat: Stat {
                    czxid: zxid,
                    mzxid: zxid,
                    ctime: time_ms,
                    mtime: time_ms,
                    pzxid: zxid,
                    ephemeral_owner,
                    ..Stat::default()
                },
                children: JavaHashSet::new(),
            },
        );
        if ephemeral_owner != 0 {
            self.ephemerals
                .entry(ephemeral_owner)
                .or_default()
                .insert(path.to_string());
        }
        triggers.push(Trigger {
            table: WatchTable::Data,
            path: path.to_string(),
            event: EventType::NodeCreated,
            suppress_previous: false,
        });
        triggers.push(Trigger {
            table: WatchTable::Child,
            path: parent_path,
            event: EventType::NodeChildrenChanged,
            suppress_previous: false,
        });
    }

    /// `DataTree.deleteNode`: the parent's `pzxid` moves (never back), its persisted
    /// `cversion` does not (it counts creates; see [`Node::wire_stat`]).
    fn delete_node(&mut self, path: &str, zxid: i64, triggers: &mut Vec<Trigger>) {
        let parent_path = parent_of(path).to_string();
        let name = child_name(path);
        let Some(parent) = self.nodes.get_mut(&parent_path) else {
            return;
        };
        parent.children.remove(name);
        if zxid > parent.stat.pzxid {
            parent.stat.pzxid = zxid;
        }
        let Some(node) = self.nodes.remove(path) else {
            return;
        };
        let owner = node.stat.ephemeral_owner;
        if owner != 0
            && let Some(set) = self.ephemerals.get_mut(&owner)
        {
            set.remove(path);
        }
        triggers.push(Trigger {
            table: WatchTable::Data,
            path: path.to_string(),
            event: EventType::NodeDeleted,
            suppress_previous: false,
        });
        triggers.push(Trigger {
            table: WatchTable::Child,
            path: path.to_string(),
            event: EventType::NodeDeleted,
            suppress_previous: true,
        });
        triggers.push(Trigger {
            table: WatchTable::Child,
            path: parent_path,
            event: EventType::NodeChildrenChanged,
            suppress_previous: false,
        });
    }
}

/// `PathUtils.validatePath`: absolute, no trailing slash (but `/`), no empty, `.` or
/// `..` component, no control or private-use characters.
pub fn validate_path(path: &str) -> Result<(), ErrorCode> {
    let bad = Err(ErrorCode::BAD_ARGUMENTS);
    let chars: Vec<char> = path.chars().collect();
    if chars.is_empty() || chars[0] != '/' {
        return bad;
    }
    if chars.len() == 1 {
        return Ok(());
    }
    if chars[chars.len() - 1] == '/' {
        return bad;
    }
    for i in 1..chars.len() {
        let (c, last) = (chars[i], chars[i - 1]);
        let ends = i + 1 == chars.len() || chars[i + 1] == '/';
        let invalid = c == '\0'
            || (c == '/' && last == '/')
            || (c == '.' && last == '.' && i >= 2 && chars[i - 2] == '/' && ends)
            || (c == '.' && last == '/' && ends)
            || ('\u{1}'..='\u{1f}').contains(&c)
            || ('\u{7f}'..='\u{9f}').contains(&c)
            || ('\u{e000}'..='\u{f8ff}').contains(&c)
            || ('\u{fff0}'..='\u{ffff}').contains(&c)
            // Java sees a supplementary character as a surrogate pair (d800-dfff),
            // which the private-use range check above refuses.
            || (c as u32) > 0xffff;
        if invalid {
            return bad;
        }
    }
    Ok(())
}
