//! `slidelimit._core`: slidelimit-core in Python types, for the `slidelimit`
//! package. It converts types and nothing else: keys, validation, script
//! text and SHA, call arguments, reply parsing, the server-error table, the
//! memory engine, metric names and defaults are all core's. Redis I/O is the
//! package's (redis-py).

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyDict, PyInt, PyList, PyString, PyTuple, PyType};
use slidelimit_core as core;
use std::borrow::Cow;
use std::sync::Mutex;

/// The package's classes, handed over once at import by `_register`: one
/// exception class per core code (in `ErrorCode::ALL` order), `InvalidType`,
/// `Algorithm`, `Limit` and `datetime.timedelta`.
struct Registered {
    errors: Vec<Py<PyType>>,
    invalid_type: Py<PyType>,
    algorithm: Py<PyAny>,
    limit: Py<PyType>,
    timedelta: Py<PyAny>,
}

static REGISTERED: PyOnceLock<Registered> = PyOnceLock::new();

fn registered(py: Python<'_>) -> PyResult<&Registered> {
    REGISTERED.get(py).ok_or_else(|| {
        PyRuntimeError::new_err("slidelimit._core is used before slidelimit registered its classes")
    })
}

/// Core's error as the package's exception, `cls(message, field)`: the
/// class of its code, or `InvalidType` for a value of the wrong Python type.
fn error_object<'py>(
    py: Python<'py>,
    e: &core::Error,
    wrong_type: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let registered = registered(py)?;
    let cls = match wrong_type {
        true => &registered.invalid_type,
        false => {
            let index = core::ErrorCode::ALL
                .iter()
                .position(|c| *c == e.code())
                .expect("every code is in ErrorCode::ALL");
            &registered.errors[index]
        }
    };
    cls.bind(py).call1((e.message(), e.field()))
}

fn raise(py: Python<'_>, e: &core::Error, wrong_type: bool) -> PyErr {
    match error_object(py, e, wrong_type) {
        Ok(value) => PyErr::from_value(value),
        Err(err) => err,
    }
}

fn to_py(py: Python<'_>, e: core::Error) -> PyErr {
    raise(py, &e, false)
}

/// An argument the conversion refused: core's error, and whether the Python
/// value was of the wrong type. Those are raised as `InvalidType`, an
/// `InvalidArgument` that is also a `TypeError`, as Python's own checks
/// raise a wrong type; core's range checks stay `ValueError`s.
struct Refusal {
    error: core::Error,
    wrong_type: bool,
}

impl From<core::Error> for Refusal {
    fn from(error: core::Error) -> Self {
        Refusal {
            error,
            wrong_type: false,
        }
    }
}

type Converted<T> = std::result::Result<T, Refusal>;

fn wrong_type(field: &'static str, problem: impl std::fmt::Display) -> Refusal {
    Refusal {
        error: core::Error::invalid(field, problem),
        wrong_type: true,
    }
}

fn refusal_to_py(py: Python<'_>, r: Refusal) -> PyErr {
    raise(py, &r.error, r.wrong_type)
}

trait IntoPy<T> {
    fn py_err(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> IntoPy<T> for core::Result<T> {
    fn py_err(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_py(py, e))
    }
}

impl<T> IntoPy<T> for Converted<T> {
    fn py_err(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|r| refusal_to_py(py, r))
    }
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".to_owned())
}

/// A `str` argument. A str that is not valid Unicode (a lone surrogate, which
/// UTF-8 cannot carry) is no valid value: an error, never a lossy conversion
/// that would merge two tenants.
fn str_arg<'a>(field: &'static str, obj: &'a Bound<'_, PyAny>) -> Converted<Cow<'a, str>> {
    let s = obj
        .cast::<PyString>()
        .map_err(|_| wrong_type(field, format!("must be a str, got {}", type_name(obj))))?;
    let text = s.to_cow().map_err(|_| {
        core::Error::invalid(
            field,
            "is not well-formed Unicode (it holds an unpaired surrogate)",
        )
    })?;
    Ok(text)
}

/// An `int` argument (not a bool, a float or any other number) that fits
/// core's u64; core then checks its range.
fn int_arg(field: &'static str, obj: &Bound<'_, PyAny>) -> Converted<u64> {
    if obj.is_instance_of::<PyBool>() || !obj.is_instance_of::<PyInt>() {
        return Err(wrong_type(
            field,
            format!("must be an int, got {}", type_name(obj)),
        ));
    }
    let n = obj.extract::<u64>().map_err(|_| {
        let negative = obj.lt(0).unwrap_or(false);
        core::Error::invalid(
            field,
            if negative {
                format!("must not be negative, got {obj}")
            } else {
                format!("must be at most 2^64 - 1, got {obj}")
            },
        )
    })?;
    Ok(n)
}

fn opt_int_arg(field: &'static str, obj: Option<&Bound<'_, PyAny>>) -> Converted<Option<u64>> {
    match obj {
        Some(o) if !o.is_none() => int_arg(field, o).map(Some),
        _ => Ok(None),
    }
}

fn mode(peek: bool) -> core::Mode {
    if peek {
        core::Mode::Peek
    } else {
        core::Mode::Acquire
    }
}

/// A validated rate-limit policy (core's `Policy`).
#[pyclass(module = "slidelimit", frozen, eq, hash)]
struct Policy {
    inner: core::Policy,
    /// Python strings of what every call of this policy repeats, made once:
    /// a call reuses one when core's argument is the same text.
    strings: Strings,
}

impl PartialEq for Policy {
    fn eq(&self, other: &Self) -> bool {
        self.inner == other.inner
    }
}

impl Eq for Policy {}

impl std::hash::Hash for Policy {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.inner.hash(state)
    }
}

struct Strings {
    acquire_sha: Py<PyString>,
    peek_sha: Py<PyString>,
    /// Every ARGV text the policy's calls repeat (limits, windows, bucket
    /// counts, algorithm names, cost 1, the empty server-time `now_ms`).
    args: Vec<(String, Py<PyString>)>,
}

impl Strings {
    fn new(py: Python<'_>, policy: &core::Policy) -> Self {
        let sha = |mode| PyString::new(py, policy.script(mode).sha1()).unbind();
        let mut texts: Vec<String> = vec!["1".to_owned(), String::new()];
        for l in policy.limits() {
            texts.push(l.limit.to_string());
            texts.push(l.window_ms.to_string());
            texts.extend(l.buckets.map(|n| n.to_string()));
            if policy.limits().len() > 1 {
                texts.push(l.algorithm.as_str().to_owned());
            }
        }
        texts.sort();
        texts.dedup();
        let args = texts
            .into_iter()
            .map(|t| {
                let p = PyString::intern(py, &t).unbind();
                (t, p)
            })
            .collect();
        Strings {
            acquire_sha: sha(core::Mode::Acquire),
            peek_sha: sha(core::Mode::Peek),
            args,
        }
    }

    /// `text` as a Python str: the cached one when it is the same text.
    fn get<'py>(&self, py: Python<'py>, text: &str) -> Bound<'py, PyAny> {
        match self.args.iter().find(|(t, _)| t == text) {
            Some((_, p)) => p.bind(py).clone().into_any(),
            None => PyString::new(py, text).into_any(),
        }
    }
}

/// One `Limit` of `limits` (the package's frozen dataclass) in core's type.
/// `field(name)` is how errors name its fields (`limits[1].limit` in a
/// policy of several).
fn limit_arg(
    py: Python<'_>,
    index: usize,
    count: usize,
    item: &Bound<'_, PyAny>,
) -> PyResult<Converted<core::Limit>> {
    let field = |name: &'static str| match count > 1 {
        true => core::limit_field(index, name).unwrap_or(name),
        false => name,
    };
    if !item.is_instance(registered(py)?.limit.bind(py))? {
        return Ok(Err(wrong_type(
            "limits",
            format!(
                "item {index} must be a slidelimit.Limit, got {}",
                type_name(item)
            ),
        )));
    }
    let algorithm = item.getattr("algorithm")?;
    let limit = item.getattr("limit")?;
    let window_ms = item.getattr("window_ms")?;
    let buckets = item.getattr("buckets")?;
    Ok((|| {
        let name = field("algorithm");
        let algorithm = core::Algorithm::parse(&str_arg(name, &algorithm)?)
            .map_err(|e| e.for_limit(index, count))?;
        Ok(core::Limit {
            algorithm,
            limit: int_arg(field("limit"), &limit)?,
            window_ms: int_arg(field("window_ms"), &window_ms)?,
            buckets: opt_int_arg(field("buckets"), Some(&buckets))?,
        })
    })())
}

#[pymethods]
impl Policy {
    /// One limit (`algorithm`, `limit`, `window_ms`, `buckets`) or several
    /// (`limits`, a sequence of `Limit`), never both.
    #[new]
    #[pyo3(signature = (namespace, resource, algorithm=None, limit=None, window_ms=None, buckets=None, limits=None))]
    #[allow(clippy::too_many_arguments)] // Python's arguments, one by one
    fn new(
        py: Python<'_>,
        namespace: &Bound<'_, PyAny>,
        resource: &Bound<'_, PyAny>,
        algorithm: Option<&Bound<'_, PyAny>>,
        limit: Option<&Bound<'_, PyAny>>,
        window_ms: Option<&Bound<'_, PyAny>>,
        buckets: Option<&Bound<'_, PyAny>>,
        limits: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let given = |o: Option<&Bound<'_, PyAny>>| o.is_some_and(|o| !o.is_none());
        let built: Converted<core::Policy> = match limits.filter(|l| !l.is_none()) {
            Some(limits) => {
                let single = [
                    ("algorithm", algorithm),
                    ("limit", limit),
                    ("window_ms", window_ms),
                    ("buckets", buckets),
                ];
                if let Some((name, _)) = single.iter().find(|(_, o)| given(*o)) {
                    let e = core::Error::invalid(
                        name,
                        "give either limits or algorithm, limit, window_ms and buckets, not both",
                    );
                    return Err(to_py(py, e));
                }
                // An ordered sequence only: a set's or a dict's order can
                // differ between processes, and with it limits[i] and
                // denied_by.
                let iter =
                    match limits.is_instance_of::<PyList>() || limits.is_instance_of::<PyTuple>() {
                        true => limits.try_iter().ok(),
                        false => None,
                    };
                let Some(iter) = iter else {
                    let e = wrong_type(
                        "limits",
                        format!(
                            "must be a list or tuple of Limit, got {}",
                            type_name(limits)
                        ),
                    );
                    return Err(refusal_to_py(py, e));
                };
                let items: Vec<Bound<'_, PyAny>> = iter.collect::<PyResult<_>>()?;
                let mut converted = Vec::with_capacity(items.len());
                if items.len() > core::MAX_LIMITS {
                    // Core refuses the count before it reads any limit.
                    let unread = core::Limit::new(core::DEFAULT_ALGORITHM, 1, 1);
                    converted.resize(items.len(), unread);
                } else {
                    for (index, item) in items.iter().enumerate() {
                        converted.push(limit_arg(py, index, items.len(), item)?.py_err(py)?);
                    }
                }
                (|| {
                    let namespace = str_arg("namespace", namespace)?;
                    let resource = str_arg("resource", resource)?;
                    Ok(core::Policy::with_limits(
                        &namespace, &resource, &converted,
                    )?)
                })()
            }
            None => {
                // An absent limit or window is None, which the conversion
                // refuses by name; an absent algorithm is core's default.
                let none = py.None().into_bound(py);
                let algorithm = algorithm.filter(|a| !a.is_none());
                let limit = limit.unwrap_or(&none);
                let window_ms = window_ms.unwrap_or(&none);
                (|| {
                    let namespace = str_arg("namespace", namespace)?;
                    let resource = str_arg("resource", resource)?;
                    let algorithm = match algorithm {
                        Some(a) => core::Algorithm::parse(&str_arg("algorithm", a)?)?,
                        None => core::DEFAULT_ALGORITHM,
                    };
                    let limit = int_arg("limit", limit)?;
                    let window_ms = int_arg("window_ms", window_ms)?;
                    // None: core's default for a bucketed window, none for the others.
                    let buckets = opt_int_arg("buckets", buckets)?;
                    Ok(core::Policy::with_buckets(
                        &namespace, &resource, algorithm, limit, window_ms, buckets,
                    )?)
                })()
            }
        };
        let inner = built.py_err(py)?;
        let strings = Strings::new(py, &inner);
        Ok(Policy { inner, strings })
    }

    #[getter]
    fn namespace(&self) -> &str {
        self.inner.namespace()
    }
    #[getter]
    fn resource(&self) -> &str {
        self.inner.resource()
    }
    #[getter]
    fn algorithm<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        registered(py)?
            .algorithm
            .bind(py)
            .call1((self.inner.algorithm().as_str(),))
    }
    #[getter]
    fn limit(&self) -> u64 {
        self.inner.limit()
    }
    #[getter]
    fn window_ms(&self) -> u64 {
        self.inner.window_ms()
    }
    /// The bucket count of a bucketed window (the default filled in); None
    /// for the other algorithms.
    #[getter]
    fn buckets(&self) -> Option<u64> {
        self.inner.buckets()
    }

    /// Every limit, in the order given (a bucketed window's `buckets`
    /// filled in), as `Limit` values; one for a policy of one limit.
    #[getter]
    fn limits<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let r = registered(py)?;
        let items = self
            .inner
            .limits()
            .iter()
            .map(|l| limit_object(py, r, l))
            .collect::<PyResult<Vec<_>>>()?;
        PyTuple::new(py, items)
    }

    /// The Redis key of `tenant` under this policy (its first limit's;
    /// `keys` has every limit's).
    fn key(&self, py: Python<'_>, tenant: &Bound<'_, PyAny>) -> PyResult<String> {
        let tenant = str_arg("tenant", tenant).py_err(py)?;
        self.inner.key(&tenant).py_err(py)
    }

    /// The key of every limit for `tenant`, in the policy's order (one
    /// Cluster slot): what a check touches and `reset` deletes.
    fn keys(&self, py: Python<'_>, tenant: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
        let tenant = str_arg("tenant", tenant).py_err(py)?;
        self.inner.keys(&tenant).py_err(py)
    }

    /// Core's cost rule for this policy: an int from 1 up to its lowest
    /// limit (a larger cost could never pass); returns it unchanged. Every
    /// check applies it; Celery's `rate_limited` applies it when decorating.
    fn check_cost(&self, py: Python<'_>, cost: &Bound<'_, PyAny>) -> PyResult<u64> {
        let cost = int_arg("cost", cost).py_err(py)?;
        self.inner.check_cost(cost).py_err(py)?;
        Ok(cost)
    }

    /// One script call, validated by core, as the arguments of redis-py's
    /// `evalsha`: `(sha1, numkeys, *keys, *args)`.
    #[pyo3(signature = (tenant, cost, now_ms, peek))]
    fn _call<'py>(
        &self,
        py: Python<'py>,
        tenant: &Bound<'py, PyAny>,
        cost: &Bound<'py, PyAny>,
        now_ms: Option<&Bound<'py, PyAny>>,
        peek: bool,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let call = (|| -> Converted<_> {
            let tenant = str_arg("tenant", tenant)?;
            let cost = int_arg("cost", cost)?;
            let now_ms = opt_int_arg("now_ms", now_ms)?;
            Ok(self.inner.build_call(&tenant, cost, now_ms, mode(peek))?)
        })()
        .py_err(py)?;
        let s = &self.strings;
        let sha = match call.script.mode {
            core::Mode::Acquire => &s.acquire_sha,
            core::Mode::Peek => &s.peek_sha,
        };
        if call.script != self.inner.script(call.script.mode) {
            let e = core::Error::new(core::ErrorCode::Internal, "a call of another script");
            return Err(to_py(py, e));
        }
        let mut items = Vec::with_capacity(2 + call.keys.len() + call.args.len());
        items.push(sha.bind(py).clone().into_any());
        items.push(call.keys.len().into_pyobject(py)?.into_any());
        for key in &call.keys {
            items.push(PyString::new(py, key).into_any());
        }
        for arg in &call.args {
            items.push(s.get(py, arg));
        }
        PyTuple::new(py, items)
    }

    /// The script text EVAL sends after a NOSCRIPT.
    fn _script_text(&self, peek: bool) -> &'static str {
        self.inner.script(mode(peek)).text()
    }

    /// Core's reading of a script reply (what redis-py returned).
    fn _decide(&self, py: Python<'_>, reply: &Bound<'_, PyAny>) -> PyResult<Decision> {
        parse_reply(reply, self.inner.limits().len())
            .py_err(py)
            .map(Decision)
    }

    /// Core's table for an error reply to a script call on `key` (the
    /// call's first; a WRONGTYPE names it and the first limit's algorithm,
    /// all core's table takes): None means
    /// "send it once as EVAL on the same node", else the exception to raise.
    /// `after_retry`: the reply to that EVAL.
    fn _server_error<'py>(
        &self,
        py: Python<'py>,
        reply: &str,
        key: &str,
        after_retry: bool,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let algorithm = self.inner.algorithm();
        let error = if after_retry {
            core::map_server_error_after_retry(reply, key, algorithm)
        } else {
            match core::map_server_error(reply, key, algorithm) {
                core::ServerErrorAction::RetryWithEval => return Ok(None),
                core::ServerErrorAction::Fail(e) => e,
            }
        };
        error_object(py, &error, false).map(Some)
    }

    fn __repr__(&self) -> String {
        let p = &self.inner;
        if let [_, _, ..] = p.limits() {
            let limits: Vec<String> = p.limits().iter().map(limit_repr).collect();
            return format!(
                "Policy({:?}, {:?}, limits=[{}])",
                p.namespace(),
                p.resource(),
                limits.join(", ")
            );
        }
        let buckets = p
            .buckets()
            .map(|n| format!(", buckets={n}"))
            .unwrap_or_default();
        format!(
            "Policy({:?}, {:?}, Algorithm.{}, limit={}, window_ms={}{buckets})",
            p.namespace(),
            p.resource(),
            p.algorithm().as_str().to_uppercase(),
            p.limit(),
            p.window_ms()
        )
    }

    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<(Bound<'py, PyType>, Bound<'py, PyTuple>)> {
        let py = slf.py();
        let p = &slf.get().inner;
        let args = if let [_, _, ..] = p.limits() {
            let limits = slf.get().limits(py)?;
            let none = py.None();
            (
                p.namespace(),
                p.resource(),
                none.clone_ref(py),
                none.clone_ref(py),
                none.clone_ref(py),
                none,
                limits,
            )
                .into_pyobject(py)?
        } else {
            (
                p.namespace(),
                p.resource(),
                p.algorithm().as_str(),
                p.limit(),
                p.window_ms(),
                p.buckets(),
            )
                .into_pyobject(py)?
        };
        Ok((slf.get_type(), args))
    }
}

fn limit_repr(l: &core::Limit) -> String {
    let buckets = l
        .buckets
        .map(|n| format!(", buckets={n}"))
        .unwrap_or_default();
    format!(
        "Limit(Algorithm.{}, limit={}, window_ms={}{buckets})",
        l.algorithm.as_str().to_uppercase(),
        l.limit,
        l.window_ms
    )
}

/// A core limit as the package's `Limit(algorithm, limit, window_ms, buckets)`.
fn limit_object<'py>(
    py: Python<'py>,
    r: &Registered,
    l: &core::Limit,
) -> PyResult<Bound<'py, PyAny>> {
    let algorithm = r.algorithm.bind(py).call1((l.algorithm.as_str(),))?;
    r.limit
        .bind(py)
        .call1((algorithm, l.limit, l.window_ms, l.buckets))
}

/// A script reply from redis-py for a policy of `limits` limits: a list of
/// five ints (six for several limits), parsed by core. A
/// non-int element reaches core as NaN, so that core names it.
fn parse_reply(reply: &Bound<'_, PyAny>, limits: usize) -> core::Result<core::Decision> {
    let malformed = |what: String| {
        core::Error::new(
            core::ErrorCode::MalformedReply,
            format!("script reply {what}; expected an array of five or six integers"),
        )
    };
    let items: Vec<Bound<'_, PyAny>> = if let Ok(list) = reply.cast::<pyo3::types::PyList>() {
        list.iter().collect()
    } else if let Ok(tuple) = reply.cast::<PyTuple>() {
        tuple.iter().collect()
    } else {
        return Err(malformed(format!("is a {}", type_name(reply))));
    };
    let ints: Option<Vec<i64>> = items
        .iter()
        .map(|item| {
            if item.is_instance_of::<PyInt>() && !item.is_instance_of::<PyBool>() {
                item.extract::<i64>().ok()
            } else {
                None
            }
        })
        .collect();
    match ints {
        Some(ints) => core::Decision::from_reply(&ints, limits),
        None => {
            let doubles: Vec<f64> = items
                .iter()
                .map(|item| match item.extract::<i64>() {
                    Ok(n) if item.is_instance_of::<PyInt>() && !item.is_instance_of::<PyBool>() => {
                        n as f64
                    }
                    _ => f64::NAN,
                })
                .collect();
            core::Decision::from_f64_reply(&doubles, limits)
        }
    }
}

/// What a check answered (immutable). Times are milliseconds.
#[pyclass(module = "slidelimit", frozen, eq, hash)]
#[derive(PartialEq, Eq, Hash)]
struct Decision(core::Decision);

#[pymethods]
impl Decision {
    #[new]
    #[pyo3(signature = (allowed, remaining, retry_after_ms, reset_after_ms, now_ms, denied_by=None))]
    fn new(
        py: Python<'_>,
        allowed: &Bound<'_, PyAny>,
        remaining: &Bound<'_, PyAny>,
        retry_after_ms: &Bound<'_, PyAny>,
        reset_after_ms: &Bound<'_, PyAny>,
        now_ms: &Bound<'_, PyAny>,
        denied_by: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        // For tests and fakes: core's rules for a decision built by hand,
        // each breach named (a reply's rules, without the script).
        let built = (|| -> Converted<_> {
            let allowed = allowed.cast::<PyBool>().map_err(|_| {
                wrong_type(
                    "allowed",
                    format!("must be a bool, got {}", type_name(allowed)),
                )
            })?;
            Ok(core::Decision::checked(
                allowed.is_true(),
                int_arg("remaining", remaining)?,
                int_arg("retry_after_ms", retry_after_ms)?,
                int_arg("reset_after_ms", reset_after_ms)?,
                int_arg("now_ms", now_ms)?,
                opt_int_arg("denied_by", denied_by)?,
            )?)
        })();
        built.py_err(py).map(Decision)
    }

    #[getter]
    fn allowed(&self) -> bool {
        self.0.allowed
    }
    #[getter]
    fn remaining(&self) -> u64 {
        self.0.remaining
    }
    #[getter]
    fn retry_after_ms(&self) -> u64 {
        self.0.retry_after_ms
    }
    #[getter]
    fn reset_after_ms(&self) -> u64 {
        self.0.reset_after_ms
    }
    #[getter]
    fn now_ms(&self) -> u64 {
        self.0.now_ms
    }
    /// For a denial by a policy of several limits: the position (from 0) of
    /// the limit that denied with the longest retry; None otherwise.
    #[getter]
    fn denied_by(&self) -> Option<u32> {
        self.0.denied_by
    }
    /// `retry_after_ms` as a `datetime.timedelta`.
    #[getter]
    fn retry_after<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        timedelta_ms(py, self.0.retry_after_ms)
    }
    /// `reset_after_ms` as a `datetime.timedelta`.
    #[getter]
    fn reset_after<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        timedelta_ms(py, self.0.reset_after_ms)
    }

    fn __repr__(&self) -> String {
        let d = &self.0;
        let denied_by = d
            .denied_by
            .map(|p| format!(", denied_by={p}"))
            .unwrap_or_default();
        format!(
            "Decision(allowed={}, remaining={}, retry_after_ms={}, reset_after_ms={}, now_ms={}{denied_by})",
            if d.allowed { "True" } else { "False" },
            d.remaining,
            d.retry_after_ms,
            d.reset_after_ms,
            d.now_ms
        )
    }

    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<(Bound<'py, PyType>, Bound<'py, PyTuple>)> {
        let d = slf.get().0;
        let args = (
            d.allowed,
            d.remaining,
            d.retry_after_ms,
            d.reset_after_ms,
            d.now_ms,
            d.denied_by,
        )
            .into_pyobject(slf.py())?;
        Ok((slf.get_type(), args))
    }
}

fn timedelta_ms(py: Python<'_>, ms: u64) -> PyResult<Bound<'_, PyAny>> {
    // timedelta(days, seconds, microseconds, milliseconds)
    registered(py)?.timedelta.bind(py).call1((0, 0, 0, ms))
}

/// Core's in-memory engine: the scripts' semantics without Redis.
#[pyclass(module = "slidelimit._core", frozen)]
struct MemoryEngine(core::MemoryEngine);

#[pymethods]
impl MemoryEngine {
    #[new]
    fn new() -> Self {
        MemoryEngine(core::MemoryEngine::new())
    }

    /// One acquire or peek: `now_ms` is the caller's time (None: the
    /// clock's); `clock_ms` is the engine's clock, which alone expires keys.
    #[pyo3(signature = (policy, tenant, cost, now_ms, clock_ms, peek))]
    #[allow(clippy::too_many_arguments)] // Python's arguments, one by one
    fn check(
        &self,
        py: Python<'_>,
        policy: &Policy,
        tenant: &Bound<'_, PyAny>,
        cost: &Bound<'_, PyAny>,
        now_ms: Option<&Bound<'_, PyAny>>,
        clock_ms: &Bound<'_, PyAny>,
        peek: bool,
    ) -> PyResult<Decision> {
        let decision = (|| -> Converted<_> {
            let tenant = str_arg("tenant", tenant)?;
            let cost = int_arg("cost", cost)?;
            let now_ms = opt_int_arg("now_ms", now_ms)?;
            let clock_ms = int_arg("clock", clock_ms)?;
            Ok(self
                .0
                .check(&policy.inner, &tenant, cost, now_ms, clock_ms, mode(peek))?)
        })();
        decision.py_err(py).map(Decision)
    }

    /// Forgets `tenant` under `policy`; True if anything was recorded.
    fn reset(&self, py: Python<'_>, policy: &Policy, tenant: &Bound<'_, PyAny>) -> PyResult<bool> {
        let tenant = str_arg("tenant", tenant).py_err(py)?;
        self.0.reset(&policy.inner, &tenant).py_err(py)
    }
}

/// Core's local deny cache for one limiter, behind a lock (core's is not
/// synchronized). The package passes `time.monotonic` in milliseconds.
#[pyclass(module = "slidelimit._core", frozen)]
struct DenyCache(Mutex<core::DenyCache>);

impl DenyCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, core::DenyCache> {
        // A panic cannot leave core's map half-updated in a way that matters
        // more than losing the cache: carry on with what it holds.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[pymethods]
impl DenyCache {
    #[new]
    fn new(py: Python<'_>, capacity: &Bound<'_, PyAny>) -> PyResult<Self> {
        let n = int_arg("deny_cache_capacity", capacity).py_err(py)?;
        let n = usize::try_from(n).unwrap_or(usize::MAX);
        core::DenyCache::new(n)
            .py_err(py)
            .map(|c| DenyCache(Mutex::new(c)))
    }

    #[getter]
    fn capacity(&self) -> usize {
        self.lock().capacity()
    }

    fn __len__(&self) -> usize {
        self.lock().len()
    }

    /// The local denial of an acquire of `cost` by `tenant` at monotonic
    /// `now_ms`, or None: ask Redis. The call was validated before.
    fn check(&self, tenant: &str, cost: u64, now_ms: u64) -> Option<Decision> {
        self.lock().check(tenant, cost, now_ms).map(Decision)
    }

    /// What Redis answered an acquire of `cost` by `tenant` sent at `now_ms`.
    fn record(&self, tenant: &str, cost: u64, decision: &Decision, now_ms: u64) {
        self.lock().record(tenant, cost, &decision.0, now_ms)
    }

    fn forget(&self, tenant: &str) {
        self.lock().forget(tenant)
    }

    fn clear(&self) {
        self.lock().clear()
    }
}

/// Every deny cache of the process drops `tenant`'s entry: a reset through
/// a limiter whose own cache is off.
#[pyfunction]
fn _forget_tenant(tenant: &str) {
    core::forget_tenant(tenant)
}

/// The Cluster slot of a key (Redis's CRC16 rule).
#[pyfunction]
fn slot(py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<u16> {
    str_arg("key", key).map(|k| core::slot(&k)).py_err(py)
}

/// Core's table for an error reply to a command that is no script call (DEL).
/// Core's wait in ms before resending a script call Redis answered with
/// `reply` without running it (TRYAGAIN while a slot migrates), at the
/// `attempt`-th resend; None when it is not to be resent.
#[pyfunction]
fn _resend_pause_ms(reply: &str, attempt: u32) -> Option<u64> {
    core::resend_pause_ms(reply, attempt)
}

#[pyfunction]
fn _command_error<'py>(py: Python<'py>, reply: &str) -> PyResult<Bound<'py, PyAny>> {
    error_object(py, &core::map_command_error(reply), false)
}

/// Core's rule for a per-call timeout in milliseconds; returns it unchanged.
#[pyfunction]
fn check_timeout_ms(py: Python<'_>, timeout_ms: &Bound<'_, PyAny>) -> PyResult<u64> {
    let ms = int_arg("timeout_ms", timeout_ms).py_err(py)?;
    core::check_timeout_ms(ms).py_err(py)
}

/// Core's rule for a cost given before any policy is at hand (Celery's
/// `rate_limited`): an int of at least 1; returns it unchanged. Its bound by
/// the limit is the policy's, at each check.
#[pyfunction]
fn _check_cost(py: Python<'_>, cost: &Bound<'_, PyAny>) -> PyResult<u64> {
    let cost = int_arg("cost", cost).py_err(py)?;
    core::check_cost_without_policy(cost).py_err(py)?;
    Ok(cost)
}

/// What a denied decision's retry_after_ms adds to the wait histogram.
#[pyfunction]
fn wait_seconds(retry_after_ms: u64) -> f64 {
    core::wait_seconds(retry_after_ms)
}

/// Called once by `slidelimit/__init__.py`: `errors` maps each core code to
/// its exception class; every code must have one.
#[pyfunction]
fn _register(
    py: Python<'_>,
    errors: &Bound<'_, PyDict>,
    invalid_type: Py<PyType>,
    algorithm: Py<PyAny>,
    limit: Py<PyType>,
    timedelta: Py<PyAny>,
) -> PyResult<()> {
    let mut classes = Vec::new();
    for code in core::ErrorCode::ALL {
        let cls = errors
            .get_item(code.as_str())?
            .ok_or_else(|| PyRuntimeError::new_err(format!("no exception class for {code}")))?;
        classes.push(cls.cast_into::<PyType>()?.unbind());
    }
    // A second import (importlib.reload) keeps the first registration.
    let _ = REGISTERED.set(
        py,
        Registered {
            errors: classes,
            invalid_type,
            algorithm,
            limit,
            timedelta,
        },
    );
    Ok(())
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("VERSION", core::VERSION)?;
    m.add("DEFAULT_NAMESPACE", core::DEFAULT_NAMESPACE)?;
    m.add("DEFAULT_ALGORITHM", core::DEFAULT_ALGORITHM.as_str())?;
    m.add("ALGORITHMS", core::Algorithm::ALL.map(|a| a.as_str()))?;
    m.add("ERROR_CODES", core::ErrorCode::ALL.map(|c| c.as_str()))?;
    m.add("MAX_TENANT_BYTES", core::MAX_TENANT_BYTES)?;
    m.add("METRIC_ALLOWED_TOTAL", core::METRIC_ALLOWED_TOTAL)?;
    m.add("METRIC_ALLOWED_TOTAL_HELP", core::METRIC_ALLOWED_TOTAL_HELP)?;
    m.add("METRIC_DENIED_TOTAL", core::METRIC_DENIED_TOTAL)?;
    m.add("METRIC_DENIED_TOTAL_HELP", core::METRIC_DENIED_TOTAL_HELP)?;
    m.add("METRIC_LOCAL_DENIED_TOTAL", core::METRIC_LOCAL_DENIED_TOTAL)?;
    m.add(
        "METRIC_LOCAL_DENIED_TOTAL_HELP",
        core::METRIC_LOCAL_DENIED_TOTAL_HELP,
    )?;
    m.add(
        "DEFAULT_DENY_CACHE_CAPACITY",
        core::DEFAULT_DENY_CACHE_CAPACITY,
    )?;
    m.add("DEFAULT_TIMEOUT_MS", core::DEFAULT_TIMEOUT_MS)?;
    m.add("MAX_DENY_CACHE_CAPACITY", core::MAX_DENY_CACHE_CAPACITY)?;
    m.add("MAX_LIMITS", core::MAX_LIMITS)?;
    m.add("METRIC_WAIT_SECONDS", core::METRIC_WAIT_SECONDS)?;
    m.add("METRIC_WAIT_SECONDS_HELP", core::METRIC_WAIT_SECONDS_HELP)?;
    m.add("COUNTER_LABELS", core::COUNTER_LABELS)?;
    m.add(
        "COUNTER_LABELS_WITH_TENANT",
        core::COUNTER_LABELS_WITH_TENANT,
    )?;
    m.add("WAIT_LABELS", core::WAIT_LABELS)?;
    m.add("WAIT_BUCKETS", core::WAIT_BUCKETS)?;
    m.add_class::<Policy>()?;
    m.add_class::<Decision>()?;
    m.add_class::<MemoryEngine>()?;
    m.add_class::<DenyCache>()?;
    m.add_function(wrap_pyfunction!(slot, m)?)?;
    m.add_function(wrap_pyfunction!(_forget_tenant, m)?)?;
    m.add_function(wrap_pyfunction!(_command_error, m)?)?;
    m.add_function(wrap_pyfunction!(_resend_pause_ms, m)?)?;
    m.add_function(wrap_pyfunction!(check_timeout_ms, m)?)?;
    m.add_function(wrap_pyfunction!(_check_cost, m)?)?;
    m.add_function(wrap_pyfunction!(wait_seconds, m)?)?;
    m.add_function(wrap_pyfunction!(_register, m)?)?;
    Ok(())
}
