//! Two pieces of the JVM whose exact behaviour reaches ZooKeeper's wire: the iteration
//! order of a `java.util.HashSet<String>` (a node's children, which `getChildren2`
//! returns in that order) and `java.util.Random` (which makes a session's password
//! from its id).

/// `String.hashCode`: over UTF-16 code units, `h = 31 h + c`, wrapping.
pub fn string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

/// `HashMap.hash`: the hash with its high half folded into the low half.
fn spread(s: &str) -> u32 {
    let h = string_hash(s) as u32;
    h ^ (h >> 16)
}

/// A set of strings that iterates in the order a `java.util.HashSet<String>` created
/// with capacity 8 (`DataNode.addChild`) does: by bucket (`(n - 1) & spread(hash)`),
/// then in insertion order within a bucket; the table doubles when the size passes
/// 3/4 of it (a resize splits each bucket keeping relative order), or when a bucket
/// reaches 9 entries in a table smaller than 64 (`treeifyBin`).
///
/// Simplification: a bucket of 9 or more entries in a table of 64 or more becomes a
/// red-black tree in Java, whose iteration order this does not follow (it keeps
/// insertion order). That takes nine names with the same low hash bits in one node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JavaHashSet {
    buckets: Vec<Vec<(u32, String)>>,
    len: usize,
}

impl JavaHashSet {
    /// An empty set (no table yet, as before the first `add`).
    pub fn new() -> Self {
        Self::default()
    }

    /// How many strings it holds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn index(&self, hash: u32) -> usize {
        (hash as usize) & (self.buckets.len() - 1)
    }

    /// Whether `s` is in the set.
    pub fn contains(&self, s: &str) -> bool {
        if self.buckets.is_empty() {
            return false;
        }
        let h = spread(s);
        self.buckets[self.index(h)].iter().any(|(_, e)| e == s)
    }

    /// Adds `s`; false if it was there.
    pub fn insert(&mut self, s: String) -> bool {
        if self.buckets.is_empty() {
            self.buckets = vec![Vec::new(); 8];
        }
        let h = spread(&s);
        let i = self.index(h);
        if self.buckets[i].iter().any(|(_, e)| *e == s) {
            return false;
        }
        self.buckets[i].push((h, s));
        if self.buckets[i].len() > 8 && self.buckets.len() < 64 {
            self.resize();
        }
        self.len += 1;
        if self.len > self.buckets.len() * 3 / 4 {
            self.resize();
        }
        true
    }

    /// Removes `s`; false if it was not there.
    pub fn remove(&mut self, s: &str) -> bool {
        if self.buckets.is_empty() {
            return false;
        }
        let i = self.index(spread(s));
        match self.buckets[i].iter().position(|(_, e)| e == s) {
            Some(p) => {
                self.buckets[i].remove(p);
                self.len -= 1;
                true
            }
            None => false,
        }
    }

    fn resize(&mut self) {
        let old = self.buckets.len();
        let mut next = vec![Vec::new(); old * 2];
        for (j, bucket) in std::mem::take(&mut self.buckets).into_iter().enumerate() {
            for (h, s) in bucket {
                let k = if (h as usize) & old == 0 { j } else { j + old };
                next[k].push((h, s));
            }
        }
        self.buckets = next;
    }

    /// The strings in Java's iteration order.
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.buckets
            .iter()
            .flat_map(|b| b.iter().map(|(_, s)| s.as_str()))
    }
}

/// `java.util.Random`: the 48-bit linear congruential generator.
#[derive(Debug, Clone)]
pub struct JavaRandom {
    seed: i64,
}

impl JavaRandom {
    const MULTIPLIER: i64 = 0x5_DEEC_E66D;
    const MASK: i64 = (1 << 48) - 1;

    /// `new Random(seed)`.
    pub fn new(seed: i64) -> Self {
        Self {
            seed: (seed ^ Self::MULTIPLIER) & Self::MASK,
        }
    }

    // Public for sim's tests (compared with the JDK's `nextInt`).
    #[doc(hidden)]
    pub fn next(&mut self, bits: u32) -> i32 {
        self.seed = (self.seed.wrapping_mul(Self::MULTIPLIER).wrapping_add(0xB)) & Self::MASK;
        (self.seed >> (48 - bits)) as i32
    }

    /// `nextBytes`: four bytes per `nextInt`, low byte first.
    pub fn next_bytes(&mut self, out: &mut [u8]) {
        let mut i = 0;
        while i < out.len() {
            let mut rnd = self.next(32);
            let n = (out.len() - i).min(4);
            for _ in 0..n {
                out[i] = rnd as u8;
                i += 1;
                rnd >>= 8;
            }
        }
    }
}

/// `ZooKeeperServer.generatePasswd`: `new Random(sessionId ^ superSecret).nextBytes`
/// into 16 bytes.
pub fn session_password(session_id: i64) -> Vec<u8> {
    const SUPER_SECRET: i64 = 0xB341_5C00;
    let mut p = vec![0u8; 16];
    JavaRandom::new(session_id ^ SUPER_SECRET).next_bytes(&mut p);
    p
}
