//! A design as locksim runs it: a name (what `--design` says on the command line) and a
//! function that builds the lock over a client's [`Deps`].

use std::sync::Arc;

use lock_impl::{Deps, LockDesign};
use scenarios::sweep::DesignSpec;

/// A lock design with the name it is registered under.
///
/// The name is what failure messages put in their `locksim replay --design NAME`
/// commands, and what your own `locksim` binary ([`crate::cli::main`]) must register
/// the same design under for those commands to run it. Build the value once, in your
/// library, and hand the same value to your tests and your binary:
///
/// ```
/// use locksim::{Deps, Design};
/// # use locksim::{Acquire, AcquireOptions, Guard, LockDesign, LockError, Release};
/// # struct MyLock(Deps);
/// # #[locksim::async_trait]
/// # impl LockDesign for MyLock {
/// #     fn name(&self) -> &str { "my-lock" }
/// #     async fn acquire(&self, _: &str, _: AcquireOptions) -> Result<Acquire, LockError> { unimplemented!() }
/// #     async fn release(&self, _: &Guard) -> Result<Release, LockError> { unimplemented!() }
/// # }
/// # impl MyLock { fn new(deps: Deps) -> Self { MyLock(deps) } }
///
/// pub fn design() -> Design {
///     Design::new("my-lock", MyLock::new)
/// }
/// assert_eq!(design().name(), "my-lock");
/// assert_eq!(design().masters(), 1);
/// ```
#[derive(Clone)]
pub struct Design {
    spec: DesignSpec,
    builtin: bool,
}

impl std::fmt::Debug for Design {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Design")
            .field("name", &self.spec.name)
            .field("masters", &self.spec.masters)
            .field("builtin", &self.builtin)
            .finish_non_exhaustive()
    }
}

impl Design {
    /// Your design, called `name`, built by `build` for every client of every run (a
    /// client that crashes and restarts gets a fresh one).
    ///
    /// `name` should be what a command line can carry: letters, digits and `-`.
    pub fn new<L, F>(name: impl Into<String>, build: F) -> Design
    where
        L: LockDesign + 'static,
        F: Fn(Deps) -> L + Send + Sync + 'static,
    {
        Design {
            spec: DesignSpec {
                name: name.into(),
                factory: Arc::new(move |deps| Arc::new(build(deps)) as Arc<dyn LockDesign>),
                masters: 1,
                backend: lock_impl::Backend::Redis,
            },
            builtin: false,
        }
    }

    /// Your design, named after the type `build` returns: `MyLock::new` is `my-lock`
    /// (the type's name without its path or generics, in kebab case). What
    /// [`crate::check`] does when given a bare function.
    ///
    /// ```
    /// # use locksim::{Acquire, AcquireOptions, Deps, Guard, LockDesign, LockError, Release};
    /// # struct RedisFifoLock(Deps);
    /// # #[locksim::async_trait]
    /// # impl LockDesign for RedisFifoLock {
    /// #     fn name(&self) -> &str { "x" }
    /// #     async fn acquire(&self, _: &str, _: AcquireOptions) -> Result<Acquire, LockError> { unimplemented!() }
    /// #     async fn release(&self, _: &Guard) -> Result<Release, LockError> { unimplemented!() }
    /// # }
    /// assert_eq!(locksim::Design::of(RedisFifoLock).name(), "redis-fifo-lock");
    /// ```
    pub fn of<L, F>(build: F) -> Design
    where
        L: LockDesign + 'static,
        F: Fn(Deps) -> L + Send + Sync + 'static,
    {
        Design::new(kebab_type_name::<L>(), build)
    }

    /// A built-in design (`set-nx-px-lua`, `redlock`, …) or one of the broken-design
    /// catalog (`broken/constant-owner`, …), by the name `locksim list` shows; the
    /// error lists the allowed names.
    ///
    /// ```
    /// let d = locksim::Design::builtin("redlock").unwrap();
    /// assert_eq!(d.masters(), 5);
    /// assert!(locksim::Design::builtin("broken/constant-owner").is_ok());
    /// let e = locksim::Design::builtin("set-nx").unwrap_err();
    /// assert!(e.contains("set-nx-px-lua"), "{e}");
    /// ```
    pub fn builtin(name: &str) -> Result<Design, String> {
        reports::input::design(name)
            .map(|spec| Design {
                spec,
                builtin: true,
            })
            .map_err(|e| e.0)
    }

    /// The same design, locking on `masters` independent Redis masters (reached
    /// through [`Deps::servers`]), as a Redlock does: scenarios with one master then
    /// give it that many copies of it, and replicated scenarios do not run it.
    ///
    /// ```
    /// // A built-in Redlock under a name of its own, as a user's Redlock would be.
    /// let mine = locksim::builtin("redlock").named("my-redlock").on_masters(5);
    /// assert_eq!((mine.name(), mine.masters(), mine.is_builtin()), ("my-redlock", 5, false));
    /// locksim::check(mine).scenario("no-faults").seeds(0..1).assert_safe();
    /// ```
    pub fn on_masters(mut self, masters: usize) -> Design {
        self.spec.masters = masters.max(1);
        self
    }

    /// The same design under another name.
    pub fn named(mut self, name: impl Into<String>) -> Design {
        self.spec.name = name.into();
        self.builtin = false;
        self
    }

    /// The name it is registered under.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// Independent masters it locks on (1 unless set with [`Design::on_masters`]).
    pub fn masters(&self) -> usize {
        self.spec.masters
    }

    /// Whether the plain `locksim` command knows it by name (a built-in or broken
    /// design), so its replay commands need no binary of yours.
    pub fn is_builtin(&self) -> bool {
        self.builtin
    }

    /// The design as the lower layers take it (`scenarios::sweep`, `reports::gate`).
    pub fn spec(&self) -> &DesignSpec {
        &self.spec
    }
}

/// Something [`crate::check`] can run: a [`Design`], or a function from [`Deps`] to
/// your lock (named as [`Design::of`] names it).
pub trait IntoDesign {
    /// The design.
    fn into_design(self) -> Design;
}

impl IntoDesign for Design {
    fn into_design(self) -> Design {
        self
    }
}

impl<L, F> IntoDesign for F
where
    L: LockDesign + 'static,
    F: Fn(Deps) -> L + Send + Sync + 'static,
{
    fn into_design(self) -> Design {
        Design::of(self)
    }
}

/// A built-in or broken-catalog design by name, for a test that checks one: panics
/// with the allowed names if there is no such design.
///
/// ```
/// let d = locksim::builtin("set-nx-px-lua");
/// assert!(d.is_builtin());
/// ```
pub fn builtin(name: &str) -> Design {
    Design::builtin(name).unwrap_or_else(|e| panic!("locksim: {e}"))
}

/// `my_crate::MyLock<T>` → `my-lock`.
fn kebab_type_name<T>() -> String {
    let full = std::any::type_name::<T>();
    let base = full.split('<').next().unwrap_or(full);
    let base = base.rsplit("::").next().unwrap_or(base);
    let mut out = String::new();
    let chars: Vec<char> = base.chars().collect();
    for (i, c) in chars.iter().enumerate() {
        if c.is_uppercase() {
            let prev_lower =
                i > 0 && (chars[i - 1].is_lowercase() || chars[i - 1].is_ascii_digit());
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            let prev_upper = i > 0 && chars[i - 1].is_uppercase();
            if i > 0 && (prev_lower || (prev_upper && next_lower)) && !out.ends_with('-') {
                out.push('-');
            }
            out.extend(c.to_lowercase());
        } else if *c == '_' {
            out.push('-');
        } else {
            out.push(*c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::kebab_type_name;

    struct MyLock;
    struct HTTPLock;
    #[allow(non_camel_case_types)]
    struct set_nx_lock;
    struct Wrapped<T>(T);

    #[test]
    fn type_names_become_kebab_case_names() {
        assert_eq!(kebab_type_name::<MyLock>(), "my-lock");
        assert_eq!(kebab_type_name::<HTTPLock>(), "http-lock");
        assert_eq!(kebab_type_name::<set_nx_lock>(), "set-nx-lock");
        assert_eq!(kebab_type_name::<Wrapped<MyLock>>(), "wrapped");
    }
}
