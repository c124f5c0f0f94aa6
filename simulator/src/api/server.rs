//! The HTTP front of the API: routing of Kubernetes paths, list/watch, CRUD, patch, the
//! `status`, `eviction` and `binding` subresources, discovery, OpenAPI documents, server-side
//! field validation, Table output for `kubectl get`, and fault injection.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use super::error::{ApiError, Result, success_status};
use super::eviction;
use super::kinds::{KindInfo, has_scale, is_node_pool};
use super::openapi::{self, validate::FieldValidation};
use super::patch::PatchType;
use super::selectors::{FieldSelector, LabelSelector};
use super::store::{Change, EventType, Store, Subresource};
use super::table::{self, IncludeObject};
use super::validation::{Admission, SKIP_VALIDATION_PARAM};
use crate::faults::Faults;

/// Shared state of the HTTP server.
#[derive(Debug)]
pub(crate) struct ApiState {
    pub(crate) store: Arc<Store>,
    pub(crate) faults: Faults,
    pub(crate) bookmark_interval: Duration,
    /// Turns true when the server shuts down; open watches end then.
    pub(crate) stop: tokio::sync::watch::Receiver<bool>,
    pub(crate) address: String,
}

/// The axum router serving the whole API.
pub(crate) fn router(state: Arc<ApiState>) -> Router {
    Router::new().fallback(handle).with_state(state)
}

fn json_response(code: u16, body: &Value) -> Response {
    (
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn error_response(e: &ApiError) -> Response {
    json_response(e.code, &e.to_status())
}

/// Query parameters the API understands.
#[derive(Debug, Default)]
struct Params {
    label_selector: LabelSelector,
    field_selector: FieldSelector,
    watch: bool,
    resource_version: Option<String>,
    bookmarks: bool,
    timeout: Option<Duration>,
    limit: Option<usize>,
    continue_token: Option<String>,
    dry_run: bool,
    send_initial_events: bool,
    field_validation: FieldValidation,
    include_object: IncludeObject,
    /// `simulatorSkipValidation=true`: the write is stored as it is (simulator only).
    admission: Admission,
}

// === impl Params ===

impl Params {
    fn parse(uri: &Uri) -> Result<Self> {
        let Query(pairs): Query<Vec<(String, String)>> = Query::try_from_uri(uri)
            .map_err(|e| ApiError::bad_request(format!("invalid query string: {e}")))?;
        let mut p = Params::default();
        let truthy = |v: &str| v == "1" || v.eq_ignore_ascii_case("true");
        for (k, v) in pairs {
            match k.as_str() {
                "labelSelector" => p.label_selector = LabelSelector::parse(&v)?,
                "fieldSelector" => p.field_selector = FieldSelector::parse(&v)?,
                "watch" => p.watch = truthy(&v),
                "resourceVersion" => p.resource_version = Some(v).filter(|v| !v.is_empty()),
                "allowWatchBookmarks" => p.bookmarks = truthy(&v),
                "sendInitialEvents" => p.send_initial_events = truthy(&v),
                "timeoutSeconds" => {
                    let s: u64 = v.parse().map_err(|_| {
                        ApiError::bad_request(format!(
                            "invalid timeoutSeconds {v:?}: expected seconds"
                        ))
                    })?;
                    p.timeout = Some(Duration::from_secs(s));
                }
                "limit" => {
                    let l: usize = v.parse().map_err(|_| {
                        ApiError::bad_request(format!("invalid limit {v:?}: expected a count"))
                    })?;
                    p.limit = Some(l).filter(|l| *l > 0);
                }
                "continue" => p.continue_token = Some(v).filter(|v| !v.is_empty()),
                "dryRun" => p.dry_run = v == "All",
                "fieldValidation" => {
                    p.field_validation = FieldValidation::parse(&v).ok_or_else(|| {
                        ApiError::bad_request(format!(
                            "invalid fieldValidation {v:?}: expected Ignore, Warn or Strict"
                        ))
                    })?;
                }
                "includeObject" => p.include_object = IncludeObject::parse(&v),
                SKIP_VALIDATION_PARAM if truthy(&v) => p.admission = Admission::Skip,
                _ => {}
            }
        }
        Ok(p)
    }

    fn selects(&self, obj: &Value) -> bool {
        self.label_selector.matches(obj) && self.field_selector.matches(obj)
    }
}

enum Route {
    Version,
    OpenApiV2,
    OpenApiV3,
    OpenApiV3Gv(String, String),
    Health,
    CoreVersions,
    Groups,
    Group(String),
    ResourceList(String, String),
    Resource {
        kind: KindInfo,
        ns: Option<String>,
        name: Option<String>,
        sub: Option<String>,
    },
}

fn route(store: &Store, path: &str) -> Result<Route> {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let (group, version, rest) = match segs.as_slice() {
        ["version"] => return Ok(Route::Version),
        ["openapi", "v2"] => return Ok(Route::OpenApiV2),
        ["openapi", "v3"] => return Ok(Route::OpenApiV3),
        ["openapi", "v3", "api", v] => return Ok(Route::OpenApiV3Gv(String::new(), v.to_string())),
        ["openapi", "v3", "apis", g, v] => {
            return Ok(Route::OpenApiV3Gv(g.to_string(), v.to_string()));
        }
        ["healthz" | "readyz" | "livez", ..] => return Ok(Route::Health),
        ["api"] => return Ok(Route::CoreVersions),
        ["apis"] => return Ok(Route::Groups),
        ["apis", g] => return Ok(Route::Group(g.to_string())),
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Err(ApiError::no_route(path)),
    };
    if rest.is_empty() {
        return Ok(Route::ResourceList(group.into(), version.into()));
    }
    let (ns, res, name, sub) = match rest {
        ["namespaces", ns, res, tail @ ..] if *res != "status" && *res != "finalize" => {
            (Some(ns.to_string()), *res, tail.first(), tail.get(1))
        }
        [res, tail @ ..] => (None, *res, tail.first(), tail.get(1)),
        [] => return Err(ApiError::no_route(path)),
    };
    let kind = store
        .kinds()
        .find(group, version, res)
        .ok_or_else(|| ApiError::no_route(path))?;
    if ns.is_some() && !kind.namespaced {
        return Err(ApiError::no_route(path));
    }
    if rest.len() > 5 || (ns.is_none() && rest.len() > 3) {
        return Err(ApiError::no_route(path));
    }
    Ok(Route::Resource {
        kind,
        ns,
        name: name.map(|s| s.to_string()),
        sub: sub.map(|s| s.to_string()),
    })
}

async fn handle(
    State(st): State<Arc<ApiState>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_string();
    let params = match Params::parse(&uri) {
        Ok(p) => p,
        Err(e) => return error_response(&e),
    };
    let decision = st.faults.decide(&path, params.watch);
    if let Some(d) = decision.delay {
        tokio::time::sleep(d).await;
    }
    if let Some(code) = decision.fail {
        let reason = match code {
            429 => "TooManyRequests",
            503 => "ServiceUnavailable",
            504 => "Timeout",
            _ => "InternalError",
        };
        let e = ApiError {
            code,
            reason,
            message: format!("injected fault on {path}"),
            details: None,
        };
        return error_response(&e);
    }
    tracing::debug!(%method, %uri, "Request");
    match serve(
        &st,
        &method,
        &path,
        &headers,
        &params,
        &body,
        decision.expire,
    )
    .await
    {
        Ok(r) => r,
        Err(e) => error_response(&e),
    }
}

async fn serve(
    st: &Arc<ApiState>,
    method: &Method,
    path: &str,
    headers: &HeaderMap,
    params: &Params,
    body: &[u8],
    expire: bool,
) -> Result<Response> {
    // A dry run works on a scratch copy of the store: validated, defaulted, never persisted.
    let scratch;
    let store = if params.dry_run && *method != Method::GET {
        scratch = st.store.scratch();
        &scratch
    } else {
        &st.store
    };
    let r = route(store, path)?;
    let get_only = |v: Value| {
        if method == Method::GET {
            Ok(json_response(200, &v))
        } else {
            Err(ApiError::method_not_allowed(format!(
                "{method} is not supported on {path}"
            )))
        }
    };
    let (kind, ns, name, sub) = match r {
        Route::Version => return get_only(version()),
        Route::OpenApiV2 => {
            // client-go asks for the protobuf encoding first; only JSON is spoken here.
            let accept = header_str(headers, header::ACCEPT);
            if !accept.is_empty() && !accept.contains("json") && !accept.contains("*/*") {
                return Err(ApiError {
                    code: 406,
                    reason: "NotAcceptable",
                    message: format!(
                        "only application/json is served at /openapi/v2, not {accept}"
                    ),
                    details: None,
                });
            }
            return get_only(openapi::v2(store));
        }
        Route::OpenApiV3 => return get_only(openapi::v3_root(store)),
        Route::OpenApiV3Gv(g, v) => {
            return openapi::v3_group_version(store, &g, &v)
                .ok_or_else(|| ApiError::no_route(path))
                .and_then(get_only);
        }
        Route::Health => return Ok((StatusCode::OK, "ok").into_response()),
        Route::CoreVersions => return get_only(store.kinds().core_versions(&st.address)),
        Route::Groups => return get_only(store.kinds().groups()),
        Route::Group(g) => {
            return store
                .kinds()
                .group(&g)
                .ok_or_else(|| ApiError::no_route(path))
                .and_then(get_only);
        }
        Route::ResourceList(g, v) => {
            return store
                .kinds()
                .resource_list(&g, &v)
                .ok_or_else(|| ApiError::no_route(path))
                .and_then(get_only);
        }
        Route::Resource {
            kind,
            ns,
            name,
            sub,
        } => (kind, ns, name, sub),
    };
    let ns_str = ns.clone().unwrap_or_default();
    let sub_kind = match sub.as_deref() {
        None => Subresource::Main,
        Some("status") if kind.status_subresource => Subresource::Status,
        Some("eviction" | "binding") if kind.group.is_empty() && kind.resource == "pods" => {
            Subresource::Main
        }
        Some("scale") if has_scale(&kind) => Subresource::Main,
        Some(other) => return Err(ApiError::no_route(&format!("{path} (subresource {other})"))),
    };
    let content_type = header_str(headers, header::CONTENT_TYPE);
    let as_table = table::wants_table(header_str(headers, header::ACCEPT));
    let parse_body = || -> Result<Value> {
        if body.is_empty() {
            return Ok(json!({}));
        }
        // Protobuf and CBOR are not spoken here; 415 makes client-go fall back to JSON.
        if content_type.contains("protobuf") || content_type.contains("cbor") {
            return Err(ApiError::unsupported_media_type(content_type));
        }
        serde_json::from_slice(body)
            .or_else(|_| serde_yaml::from_slice(body))
            .map_err(|e| ApiError::bad_request(format!("the request body is not valid JSON: {e}")))
    };
    if sub.as_deref() == Some("scale")
        && let Some(name) = &name
    {
        return scale(store, &kind, &ns_str, name, method, content_type, body);
    }
    match (method.clone(), name) {
        (Method::GET, None) if params.watch || expire => {
            let table = as_table.then_some(params.include_object);
            watch(st, &kind, ns, params, expire, table)
        }
        (Method::GET, None) => {
            let mut l = list(store, &kind, ns.as_deref(), params)?;
            if as_table {
                let items = l["items"].take();
                let items = items.as_array().map_or(&[][..], Vec::as_slice);
                l = table::table(
                    store,
                    &kind,
                    items,
                    l["metadata"].take(),
                    params.include_object,
                );
            }
            Ok(json_response(200, &l))
        }
        (Method::POST, None) => {
            let obj = parse_body()?;
            let warnings = check_fields(store, &kind, &obj, params)?;
            Ok(with_warnings(
                json_response(
                    201,
                    &store.create_with(&kind, &ns_str, obj, params.admission)?,
                ),
                &warnings,
            ))
        }
        (Method::DELETE, None) => {
            let (items, _) = store.list(&kind, ns.as_deref());
            let mut deleted = Vec::new();
            for o in items.iter().filter(|o| params.selects(o)) {
                let n = o["metadata"]["name"].as_str().unwrap_or_default();
                let o_ns = o["metadata"]["namespace"].as_str().unwrap_or_default();
                if let Ok(d) = store.delete(&kind, o_ns, n, None) {
                    deleted.push(d);
                }
            }
            Ok(json_response(
                200,
                &list_doc(&kind, deleted, store.current_rv(), None),
            ))
        }
        (Method::GET, Some(name)) => {
            let obj = store.get(&kind, &ns_str, &name)?;
            if as_table {
                let meta = json!({"resourceVersion": obj["metadata"]["resourceVersion"]});
                let t = table::table(store, &kind, &[obj], meta, params.include_object);
                return Ok(json_response(200, &t));
            }
            Ok(json_response(200, &obj))
        }
        (Method::PUT, Some(name)) => {
            let obj = parse_body()?;
            let warnings = check_fields(store, &kind, &obj, params)?;
            Ok(with_warnings(
                json_response(
                    200,
                    &store.update_with(&kind, &ns_str, &name, obj, sub_kind, params.admission)?,
                ),
                &warnings,
            ))
        }
        (Method::PATCH, Some(name)) => {
            let pt = PatchType::from_content_type(content_type)?;
            let patch = pt.parse_body(body)?;
            // A JSON patch is a list of operations, not a partial object: nothing to check.
            let warnings = if pt == PatchType::Json {
                Vec::new()
            } else {
                check_fields(store, &kind, &patch, params)?
            };
            let exists = store.get(&kind, &ns_str, &name).is_ok();
            let out = store.patch_with(
                &kind,
                &ns_str,
                &name,
                pt,
                &patch,
                sub_kind,
                params.admission,
            )?;
            Ok(with_warnings(
                json_response(if exists { 200 } else { 201 }, &out),
                &warnings,
            ))
        }
        (Method::DELETE, Some(name)) => {
            let opts = parse_body()?;
            let pre = opts.get("preconditions").filter(|p| p.is_object());
            Ok(json_response(
                200,
                &store.delete_with_grace(
                    &kind,
                    &ns_str,
                    &name,
                    pre,
                    opts["gracePeriodSeconds"].as_i64(),
                )?,
            ))
        }
        (Method::POST, Some(name)) if sub.as_deref() == Some("eviction") => {
            let opts = parse_body()?;
            evict(store, &kind, &ns_str, &name, &opts)?;
            Ok(json_response(201, &success_status(201)))
        }
        (Method::POST, Some(name)) if sub.as_deref() == Some("binding") => {
            let binding = parse_body()?;
            bind(store, &kind, &ns_str, &name, &binding)?;
            Ok(json_response(201, &success_status(201)))
        }
        (m, _) => Err(ApiError::method_not_allowed(format!(
            "{m} is not supported on {path}"
        ))),
    }
}

fn header_str(headers: &HeaderMap, name: header::HeaderName) -> &str {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

/// Server-side field validation of a request body (an object or a merge/apply patch): with
/// `Strict`, unknown fields fail the request as the API server fails it; with `Warn`, they are
/// returned as warnings for `Warning` headers. A write that skips validation is not checked.
fn check_fields(
    store: &Store,
    kind: &KindInfo,
    body: &Value,
    params: &Params,
) -> Result<Vec<String>> {
    let mode = params.field_validation;
    if mode == FieldValidation::Ignore || params.admission == Admission::Skip {
        return Ok(Vec::new());
    }
    let Some((schema, defs)) = openapi::schema_for(store, kind) else {
        return Ok(Vec::new());
    };
    let unknown = openapi::validate::unknown_fields(body, &schema, defs);
    if unknown.is_empty() {
        return Ok(Vec::new());
    }
    let listed: Vec<String> = unknown
        .iter()
        .map(|f| format!("unknown field \"{f}\""))
        .collect();
    if mode == FieldValidation::Strict {
        return Err(ApiError::bad_request(format!(
            "{k} in version \"{v}\" cannot be handled as a {k}: strict decoding error: {}",
            listed.join(", "),
            k = kind.kind,
            v = kind.version,
        )));
    }
    Ok(listed)
}

/// Adds one `Warning: 299 - "..."` header per message, as the API server reports warnings.
fn with_warnings(mut response: Response, warnings: &[String]) -> Response {
    for w in warnings {
        let text = format!("299 - {:?}", w);
        if let Ok(v) = header::HeaderValue::from_str(&text) {
            response.headers_mut().append(header::WARNING, v);
        }
    }
    response
}

fn version() -> Value {
    json!({
        "major": "1",
        "minor": "33",
        "gitVersion": "v1.33.0-dovetail-simulator",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

fn list_doc(kind: &KindInfo, items: Vec<Value>, rv: u64, cont: Option<(String, usize)>) -> Value {
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if let Some((token, remaining)) = cont {
        meta["continue"] = json!(token);
        meta["remainingItemCount"] = json!(remaining);
    }
    json!({
        "kind": format!("{}List", kind.kind),
        "apiVersion": kind.api_version(),
        "metadata": meta,
        "items": items,
    })
}

fn list(store: &Store, kind: &KindInfo, ns: Option<&str>, params: &Params) -> Result<Value> {
    let (items, rv) = store.list(kind, ns);
    let key = |o: &Value| {
        format!(
            "{}/{}",
            o["metadata"]["namespace"].as_str().unwrap_or(""),
            o["metadata"]["name"].as_str().unwrap_or("")
        )
    };
    let mut items: Vec<Value> = items.into_iter().filter(|o| params.selects(o)).collect();
    if let Some(token) = &params.continue_token {
        let (token_rv, after) = token
            .split_once(':')
            .ok_or_else(|| ApiError::bad_request(format!("invalid continue token {token:?}")))?;
        let _: u64 = token_rv
            .parse()
            .map_err(|_| ApiError::bad_request(format!("invalid continue token {token:?}")))?;
        items.retain(|o| key(o).as_str() > after);
    }
    let mut cont = None;
    if let Some(limit) = params.limit
        && items.len() > limit
    {
        let remaining = items.len() - limit;
        items.truncate(limit);
        if let Some(last) = items.last() {
            cont = Some((format!("{rv}:{}", key(last)), remaining));
        }
    }
    Ok(list_doc(kind, items, rv, cont))
}

fn watch_line(kind: &str, object: &Value) -> Bytes {
    let mut s = json!({"type": kind, "object": object}).to_string();
    s.push('\n');
    Bytes::from(s)
}

/// The event a watcher with these params sees for a change, if any: selectors turn
/// modifications into ADDED/DELETED when an object enters or leaves the selection.
fn translate(c: &Change, ns: Option<&str>, params: &Params) -> Option<&'static str> {
    if ns.is_some_and(|n| n != c.namespace) {
        return None;
    }
    let now = params.selects(&c.object);
    let before = c.prev.as_ref().map(|p| params.selects(p));
    match (c.kind, before) {
        (EventType::Modified, Some(true)) if !now => Some("DELETED"),
        (EventType::Modified, Some(false)) if now => Some("ADDED"),
        (EventType::Modified, Some(false)) => None,
        (k, _) if now => Some(k.as_str()),
        _ => None,
    }
}

fn watch(
    st: &Arc<ApiState>,
    kind: &KindInfo,
    ns: Option<String>,
    params: &Params,
    expire: bool,
    table: Option<IncludeObject>,
) -> Result<Response> {
    let from = match params.resource_version.as_deref() {
        None => None,
        Some(v) => Some(v.parse::<u64>().map_err(|_| {
            ApiError::bad_request(format!(
                "invalid resourceVersion {v:?}: expected an integer"
            ))
        })?),
    };
    let stream_body = |lines: Vec<Bytes>| {
        let s = futures::stream::iter(lines.into_iter().map(Ok::<_, Infallible>));
        Response::builder()
            .status(200)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from_stream(s))
            .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
    };
    if expire {
        let rv = from.unwrap_or(0);
        return Ok(stream_body(vec![watch_line(
            "ERROR",
            &ApiError::gone(rv, rv + 1).to_status(),
        )]));
    }
    let start = if params.send_initial_events {
        None
    } else {
        from
    };
    let sub = match st.store.subscribe(kind, start) {
        Ok(s) => s,
        Err(e) if e.code == 410 => {
            return Ok(stream_body(vec![watch_line("ERROR", &e.to_status())]));
        }
        Err(e) => return Err(e),
    };
    let (tx, rx) = mpsc::channel::<std::result::Result<Bytes, std::io::Error>>(64);
    let params = Params {
        label_selector: params.label_selector.clone(),
        field_selector: params.field_selector.clone(),
        bookmarks: params.bookmarks,
        timeout: params.timeout,
        send_initial_events: params.send_initial_events,
        ..Params::default()
    };
    let kind = kind.clone();
    // With `as=Table`, each event carries a one-row Table; as upstream, only the first one
    // carries the column definitions.
    let store = Arc::clone(&st.store);
    let mut columns_sent = false;
    let mut render = move |kind: &KindInfo, obj: &Value| -> Value {
        let Some(include) = table else {
            return obj.clone();
        };
        let meta = json!({"resourceVersion": obj["metadata"]["resourceVersion"]});
        let mut t = table::table(&store, kind, std::slice::from_ref(obj), meta, include);
        if columns_sent {
            t["columnDefinitions"] = json!([]);
        }
        columns_sent = true;
        t
    };
    let mut drops = st.faults.drops();
    drops.mark_unchanged();
    let bookmark_every = st.bookmark_interval;
    let mut stop = st.stop.clone();
    tokio::spawn(async move {
        let res = kind.key();
        let mut live = sub.live;
        let mut progress = sub.rv;
        for c in &sub.initial {
            if let Some(t) = translate(c, ns.as_deref(), &params)
                && tx
                    .send(Ok(watch_line(t, &render(&kind, &c.object))))
                    .await
                    .is_err()
            {
                return;
            }
        }
        let bookmark = |rv: u64, initial_end: bool| {
            let mut meta = json!({"resourceVersion": rv.to_string()});
            if initial_end {
                meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
            }
            watch_line(
                "BOOKMARK",
                &json!({"kind": kind.kind, "apiVersion": kind.api_version(), "metadata": meta}),
            )
        };
        if params.send_initial_events && tx.send(Ok(bookmark(progress, true))).await.is_err() {
            return;
        }
        let timeout = tokio::time::sleep(params.timeout.unwrap_or(Duration::from_secs(1800)));
        tokio::pin!(timeout);
        let mut ticks = tokio::time::interval(bookmark_every);
        ticks.tick().await;
        loop {
            tokio::select! {
                r = live.recv() => match r {
                    Ok(c) => {
                        if c.rv <= progress {
                            continue;
                        }
                        progress = c.rv;
                        if c.res != res {
                            continue;
                        }
                        if let Some(t) = translate(&c, ns.as_deref(), &params)
                            && tx.send(Ok(watch_line(t, &render(&kind, &c.object)))).await.is_err()
                        {
                            return;
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        let _ = tx.send(Ok(watch_line("ERROR", &ApiError::gone(progress, progress + 1).to_status()))).await;
                        return;
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                },
                _ = ticks.tick(), if params.bookmarks => {
                    if tx.send(Ok(bookmark(progress, false))).await.is_err() {
                        return;
                    }
                }
                _ = &mut timeout => return,
                _ = stop.changed() => return,
                _ = drops.changed() => {
                    let _ = tx.send(Err(std::io::Error::other("watch connection dropped by fault injection"))).await;
                    return;
                }
                _ = tx.closed() => return,
            }
        }
    });
    let stream =
        futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|x| (x, rx)) });
    Response::builder()
        .status(200)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from_stream(stream))
        .map_err(|e| ApiError::internal(format!("building the watch response: {e}")))
}

fn scale_doc(obj: &Value, node_pool: bool) -> Value {
    let selector = obj["spec"]["selector"]["matchLabels"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    let meta = &obj["metadata"];
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"],
            "resourceVersion": meta["resourceVersion"], "creationTimestamp": meta["creationTimestamp"],
        },
        "spec": {"replicas": obj["spec"]["replicas"].as_i64().unwrap_or(1)},
        "status": {
            "replicas": obj["status"][if node_pool { "nodes" } else { "replicas" }].as_i64().unwrap_or(0),
            "selector": selector,
        },
    })
}

/// The `scale` subresource of Deployments, ReplicaSets, StatefulSets and NodePools
/// (autoscaling/v1 Scale). A NodePool without `spec.replicas` is dynamic and cannot be scaled
/// (its CRD's rule: no transition between static and dynamic).
fn scale(
    store: &Store,
    kind: &KindInfo,
    ns: &str,
    name: &str,
    method: &Method,
    content_type: &str,
    body: &[u8],
) -> Result<Response> {
    let current = store.get(kind, ns, name)?;
    let node_pool = is_node_pool(kind);
    let wanted = match *method {
        Method::GET => return Ok(json_response(200, &scale_doc(&current, node_pool))),
        Method::PUT => serde_json::from_slice::<Value>(body)
            .map_err(|e| ApiError::bad_request(format!("the Scale body is not valid JSON: {e}")))?,
        Method::PATCH => {
            let pt = PatchType::from_content_type(content_type)?;
            let mut doc = scale_doc(&current, node_pool);
            pt.apply(&mut doc, &pt.parse_body(body)?)?;
            doc
        }
        _ => {
            return Err(ApiError::method_not_allowed(format!(
                "{method} is not supported on scale"
            )));
        }
    };
    let replicas = wanted["spec"]["replicas"]
        .as_i64()
        .filter(|r| *r >= 0)
        .ok_or_else(|| {
            ApiError::invalid(
                "Scale",
                name,
                "spec.replicas",
                "must be a non-negative integer",
            )
        })?;
    if node_pool && current["spec"]["replicas"].as_i64().is_none() {
        return Err(ApiError::invalid(
            &kind.kind,
            name,
            "spec",
            "Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) provisioning modes",
        ));
    }
    if let Some(rv) = wanted["metadata"]["resourceVersion"].as_str()
        && *method == Method::PUT
        && current["metadata"]["resourceVersion"].as_str() != Some(rv)
    {
        return Err(ApiError::conflict(
            &kind.qualified(),
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        ));
    }
    let out = store.mutate(kind, ns, name, Subresource::Main, |o| {
        let changed = o["spec"]["replicas"].as_i64() != Some(replicas);
        o["spec"]["replicas"] = json!(replicas);
        Ok(changed)
    })?;
    Ok(json_response(200, &scale_doc(&out, node_pool)))
}

/// The eviction subresource: deletes the pod unless a PodDisruptionBudget forbids it.
fn evict(store: &Store, pods: &KindInfo, ns: &str, name: &str, opts: &Value) -> Result<()> {
    let pod = store.get(pods, ns, name)?;
    let pdb_kind = store
        .kinds()
        .find("policy", "v1", "poddisruptionbudgets")
        .ok_or_else(|| ApiError::internal("poddisruptionbudgets are not served"))?;
    let (pdbs, _) = store.list(&pdb_kind, Some(ns));
    let matching: Vec<&Value> = pdbs
        .iter()
        .filter(|p| eviction::pdb_selects(p, &pod))
        .collect();
    let phase = pod["status"]["phase"].as_str().unwrap_or("");
    let checked = !matches!(phase, "Pending" | "Succeeded" | "Failed")
        && pod["metadata"]["deletionTimestamp"].is_null();
    if checked && matching.len() > 1 {
        return Err(ApiError::internal(
            "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
        ));
    }
    if checked && let Some(pdb) = matching.first() {
        let (pods_all, _) = store.list(pods, Some(ns));
        let b = eviction::budget(pdb, &pods_all);
        let always = pdb["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow";
        let ok = if eviction::pod_is_healthy(&pod) {
            b.allowed >= 1
        } else {
            always || b.healthy >= b.desired
        };
        if !ok {
            let pdb_name = pdb["metadata"]["name"].as_str().unwrap_or_default();
            return Err(ApiError::disruption_budget(
                pdb_name,
                format!(
                    "needs {} healthy pods and has {} currently",
                    b.desired, b.healthy
                ),
            ));
        }
    }
    let pre = opts["deleteOptions"]
        .get("preconditions")
        .filter(|p| p.is_object());
    store.delete(pods, ns, name, pre).map(|_| ())
}

/// The binding subresource: assigns a pending pod to a node, as the scheduler does.
fn bind(store: &Store, pods: &KindInfo, ns: &str, name: &str, binding: &Value) -> Result<()> {
    let node = binding["target"]["name"]
        .as_str()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| ApiError::invalid("Binding", name, "target.name", "Required value"))?
        .to_string();
    let now = store.clock().rfc3339();
    store
        .mutate(pods, ns, name, Subresource::Both, |pod| {
            if let Some(current) = pod["spec"]["nodeName"].as_str()
                && !current.is_empty()
            {
                return Err(ApiError::conflict(
                    "pods/binding",
                    name,
                    &format!("pod {name} is already assigned to node \"{current}\""),
                ));
            }
            pod["spec"]["nodeName"] = json!(node);
            set_condition(pod, "PodScheduled", "True", None, None, &now);
            Ok(true)
        })
        .map(|_| ())
}

/// Sets a status condition (replacing one of the same type), keeping `lastTransitionTime` when
/// the status does not change.
pub(crate) fn set_condition(
    obj: &mut Value,
    ctype: &str,
    status: &str,
    reason: Option<&str>,
    message: Option<&str>,
    now: &str,
) {
    if !obj["status"]["conditions"].is_array() {
        obj["status"]["conditions"] = json!([]);
    }
    let Some(conds) = obj["status"]["conditions"].as_array_mut() else {
        return;
    };
    let mut c =
        json!({"type": ctype, "status": status, "lastTransitionTime": now, "lastProbeTime": null});
    if let Some(r) = reason {
        c["reason"] = json!(r);
    }
    if let Some(m) = message {
        c["message"] = json!(m);
    }
    match conds.iter_mut().find(|x| x["type"] == ctype) {
        Some(existing) => {
            if existing["status"] == status {
                c["lastTransitionTime"] = existing["lastTransitionTime"].clone();
            }
            *existing = c;
        }
        None => conds.push(c),
    }
}
