//! Leader election on a `coordination.k8s.io/v1` Lease, the protocol of client-go's
//! `leaderelection`, so that only one replica of an operator acts on etcd at a time. Two replicas
//! reconciling the same cluster could each remove "one" member and together break quorum.
//!
//! The decision ([`decide`]) is pure: given the Lease as read, who we are and the time, it says
//! whether to create, take, renew or wait. [`acquire`] and the renew task do the I/O: every write
//! is a `resourceVersion`-checked replace (or a create), so of two contenders writing the same
//! version exactly one succeeds and the other gets 409 Conflict, re-reads and sees the winner.
//!
//! Timing (client-go's defaults): the holder renews every `retry_period`; if it cannot renew for
//! `renew_deadline` it declares itself lost ([`Leadership::lost`]) and must stop acting. Others
//! take the Lease only once `renewTime + leaseDurationSeconds` has passed, and
//! `renew_deadline < lease_duration`, so the old holder has stopped before anyone can take over.
//! Expiry compares the holder's `renewTime` with our clock, so this assumes node clocks agree to
//! well within `lease_duration - renew_deadline` (client-go instead times from when it observed a
//! change; NTP-synced nodes make the two equivalent).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Api;
use kube::api::PostParams;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Where the Lease is, who we are, and the timings (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseConfig {
    pub namespace: String,
    pub name: String,
    /// Unique per replica: the Pod name.
    pub identity: String,
    /// How long others wait after our last renewal before taking the Lease. Written to the
    /// Lease in whole seconds (rounded up).
    pub lease_duration: Duration,
    /// How long the holder keeps trying to renew before it gives up leadership.
    pub renew_deadline: Duration,
    /// How often the holder renews and a contender retries.
    pub retry_period: Duration,
    /// A Lease (same namespace) an older release of this operator held under another name:
    /// after taking ours, [`acquire`] waits until nobody holds that one. The old Pod of a rolling
    /// upgrade renews it until it stops, so the new Pod never acts while the old one still does
    /// (the chart moved the Lease's name from the binary's to one derived from the release).
    pub previous_name: Option<String>,
}

impl LeaseConfig {
    /// client-go's defaults: 15 s lease, 10 s renew deadline, 2 s retry period.
    pub fn new(
        namespace: impl Into<String>,
        name: impl Into<String>,
        identity: impl Into<String>,
    ) -> Self {
        LeaseConfig {
            namespace: namespace.into(),
            name: name.into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            previous_name: None,
        }
    }

    /// The timings must nest, or two holders could act at once.
    fn validate(&self) -> Result<(), LeaseError> {
        let invalid =
            |field: &'static str, detail: String| LeaseError::InvalidConfig { field, detail };
        if self.identity.is_empty() {
            return Err(invalid("identity", "must not be empty".into()));
        }
        if self.retry_period.is_zero() {
            return Err(invalid("retry_period", "must be positive".into()));
        }
        if self.renew_deadline <= self.retry_period {
            return Err(invalid(
                "renew_deadline",
                format!(
                    "{:?} must exceed retry_period {:?}",
                    self.renew_deadline, self.retry_period
                ),
            ));
        }
        if self.lease_duration <= self.renew_deadline {
            return Err(invalid(
                "lease_duration",
                format!(
                    "{:?} must exceed renew_deadline {:?}, or a standby could take the Lease \
                     while the holder still acts",
                    self.lease_duration, self.renew_deadline
                ),
            ));
        }
        if self.lease_duration_seconds().is_none() {
            return Err(invalid(
                "lease_duration",
                format!("{:?} does not fit in i32 seconds", self.lease_duration),
            ));
        }
        Ok(())
    }

    /// `lease_duration` in whole seconds, rounded up so others never wait less than we assume.
    fn lease_duration_seconds(&self) -> Option<i32> {
        let secs = self
            .lease_duration
            .as_secs()
            .checked_add(u64::from(self.lease_duration.subsec_nanos() > 0))?;
        i32::try_from(secs).ok()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    #[error("invalid lease configuration: {field} {detail}")]
    InvalidConfig { field: &'static str, detail: String },
    #[error("reading Lease {namespace}/{name}: {source}")]
    Read {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("creating Lease {namespace}/{name}: {source}")]
    Create {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("updating Lease {namespace}/{name}: {source}")]
    Replace {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    /// The leader election's own thread, runtime or API client could not be started.
    #[error("starting the leader election's own thread: {detail}")]
    OwnThread { detail: String },
}

impl LeaseError {
    pub fn reason(&self) -> &'static str {
        match self {
            LeaseError::InvalidConfig { .. } => "InvalidLeaseConfig",
            LeaseError::Read { .. } => "LeaseReadFailed",
            LeaseError::Create { .. } => "LeaseCreateFailed",
            LeaseError::Replace { .. } => "LeaseUpdateFailed",
            LeaseError::OwnThread { .. } => "LeaseThreadFailed",
        }
    }

    /// Errors that retrying cannot fix (missing RBAC, a rejected object): `acquire` returns
    /// them so the process fails visibly instead of waiting forever.
    fn is_permanent(&self) -> bool {
        let source = match self {
            LeaseError::InvalidConfig { .. } | LeaseError::OwnThread { .. } => return true,
            LeaseError::Read { source, .. }
            | LeaseError::Create { source, .. }
            | LeaseError::Replace { source, .. } => source,
        };
        matches!(api_code(source), Some(400 | 401 | 403 | 422))
    }

    fn is_conflict(&self) -> bool {
        match self {
            LeaseError::Create { source, .. } | LeaseError::Replace { source, .. } => {
                // 409: AlreadyExists on create, Conflict (stale resourceVersion) on replace.
                api_code(source) == Some(409)
            }
            _ => false,
        }
    }
}

fn api_code(error: &kube::Error) -> Option<u16> {
    match error {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

/// What to do with the Lease as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// No Lease object: create it, holding it.
    Create,
    /// Nobody holds it, or the holder's lease expired: take it.
    Take,
    /// We hold it: renew.
    Renew,
    /// Someone else holds it for at least this long.
    Wait(Duration),
}

/// `spec` is `None` when the Lease object does not exist (pass a default spec for an object that
/// exists without one). The holder's lease expires once `renewTime + leaseDurationSeconds < now`;
/// a holder without `renewTime` or `leaseDurationSeconds` never promised anything and counts as
/// expired.
pub fn decide(spec: Option<&LeaseSpec>, me: &str, now: Timestamp) -> Decision {
    let Some(spec) = spec else {
        return Decision::Create;
    };
    let holder = spec.holder_identity.as_deref().unwrap_or_default();
    if holder.is_empty() {
        return Decision::Take;
    }
    if holder == me {
        return Decision::Renew;
    }
    let Some(renewed) = spec.renew_time.as_ref().map(|t| t.0) else {
        return Decision::Take;
    };
    let duration =
        SignedDuration::from_secs(i64::from(spec.lease_duration_seconds.unwrap_or(0).max(0)));
    let Ok(expires) = renewed.checked_add(duration) else {
        // Beyond the representable range: treat as held for as long as we can tell.
        return Decision::Wait(Duration::MAX);
    };
    if expires < now {
        return Decision::Take;
    }
    let remaining = now.duration_until(expires);
    Decision::Wait(Duration::try_from(remaining).unwrap_or(Duration::ZERO))
}

/// The Lease after `decision` was carried out by `me` at `now`; `None` for `Wait`.
fn next_spec(
    current: Option<&LeaseSpec>,
    decision: &Decision,
    config: &LeaseConfig,
    now: Timestamp,
) -> Option<LeaseSpec> {
    let mut spec = current.cloned().unwrap_or_default();
    let now = Some(MicroTime(now));
    spec.lease_duration_seconds = config.lease_duration_seconds();
    spec.renew_time = now.clone();
    match decision {
        Decision::Create => {
            spec.holder_identity = Some(config.identity.clone());
            spec.acquire_time = now;
            spec.lease_transitions = Some(0);
        }
        Decision::Take => {
            spec.holder_identity = Some(config.identity.clone());
            spec.acquire_time = now;
            // client-go counts every change of holder, including from nobody to us.
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0).saturating_add(1));
        }
        Decision::Renew => {}
        Decision::Wait(_) => return None,
    }
    Some(spec)
}

/// Outcome of one read-decide-write round.
enum Round {
    /// We hold the Lease now.
    Held,
    /// Someone else holds it (`None`: nobody, but we were not allowed to take it).
    Other {
        holder: Option<String>,
        remaining: Duration,
    },
}

/// The Lease API plus our configuration, for the I/O half.
#[derive(Clone)]
struct Contender {
    api: Api<Lease>,
    config: LeaseConfig,
    /// The Lease as our last write returned it: a renewal replaces it at its resourceVersion
    /// without reading first (one round trip, not two; a 409 means someone wrote since, and the
    /// renewal reads and decides as usual).
    written: std::sync::Arc<std::sync::Mutex<Option<Lease>>>,
}

impl Contender {
    async fn read(&self) -> Result<Option<Lease>, LeaseError> {
        self.api
            .get_opt(&self.config.name)
            .await
            .map_err(|source| LeaseError::Read {
                namespace: self.config.namespace.clone(),
                name: self.config.name.clone(),
                source,
            })
    }

    /// Read, decide, write. `allow_take`: whether a free or expired Lease may be taken (a holder
    /// renewing must not silently re-take a Lease someone else cleared or took).
    async fn round(&self, allow_take: bool) -> Result<Round, LeaseError> {
        let lease = self.read().await?;
        let default_spec = LeaseSpec::default();
        let spec = lease
            .as_ref()
            .map(|lease| lease.spec.as_ref().unwrap_or(&default_spec));
        let now = Timestamp::now();
        let decision = decide(spec, &self.config.identity, now);
        let holder = spec.and_then(|s| s.holder_identity.clone());
        match (&decision, allow_take) {
            (Decision::Wait(remaining), _) => {
                return Ok(Round::Other {
                    holder,
                    remaining: *remaining,
                });
            }
            (Decision::Create | Decision::Take, false) => {
                return Ok(Round::Other {
                    holder,
                    remaining: Duration::ZERO,
                });
            }
            _ => {}
        }
        let Some(new_spec) = next_spec(spec, &decision, &self.config, now) else {
            return Ok(Round::Other {
                holder,
                remaining: Duration::ZERO,
            });
        };
        match lease {
            None => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.config.name.clone()),
                        namespace: Some(self.config.namespace.clone()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(new_spec),
                };
                let created = self
                    .api
                    .create(&PostParams::default(), &lease)
                    .await
                    .map_err(|source| LeaseError::Create {
                        namespace: self.config.namespace.clone(),
                        name: self.config.name.clone(),
                        source,
                    })?;
                self.remember(Some(created));
            }
            Some(mut lease) => {
                // metadata.resourceVersion is kept from the read: the write fails with 409 if
                // anyone wrote in between.
                lease.spec = Some(new_spec);
                let replaced = self.replace(&lease).await?;
                self.remember(Some(replaced));
            }
        }
        if decision != Decision::Renew {
            tracing::info!(
                namespace = %self.config.namespace,
                lease = %self.config.name,
                identity = %self.config.identity,
                previous = holder.as_deref().unwrap_or_default(),
                "acquired leadership"
            );
        }
        Ok(Round::Held)
    }

    fn remember(&self, lease: Option<Lease>) {
        *self
            .written
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = lease;
    }

    /// Renews by replacing the Lease as we last wrote it, without reading it first. `true`
    /// when that write succeeded (nobody wrote since: it is still ours).
    async fn renew_as_written(&self) -> bool {
        let last = self
            .written
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        let Some(mut lease) = last else {
            return false;
        };
        let Some(spec) = lease.spec.as_mut() else {
            return false;
        };
        if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            return false;
        }
        spec.renew_time = Some(MicroTime(Timestamp::now()));
        spec.lease_duration_seconds = self.config.lease_duration_seconds();
        match self.replace(&lease).await {
            Ok(replaced) => {
                self.remember(Some(replaced));
                true
            }
            Err(_) => false,
        }
    }

    async fn replace(&self, lease: &Lease) -> Result<Lease, LeaseError> {
        self.api
            .replace(&self.config.name, &PostParams::default(), lease)
            .await
            .map_err(|source| LeaseError::Replace {
                namespace: self.config.namespace.clone(),
                name: self.config.name.clone(),
                source,
            })
    }

    /// Renew until it succeeds or someone else holds the Lease; conflicts re-read at once, other
    /// errors retry after a short pause. The caller bounds the time.
    async fn renew(&self) -> Result<(), Option<String>> {
        if self.renew_as_written().await {
            return Ok(());
        }
        loop {
            match self.round(false).await {
                Ok(Round::Held) => return Ok(()),
                Ok(Round::Other { holder, .. }) => return Err(holder),
                Err(error) if error.is_conflict() => {}
                Err(error) => {
                    tracing::warn!(%error, lease = %self.config.name, "renewing the lease failed");
                    tokio::time::sleep(self.renew_pause()).await;
                }
            }
        }
    }

    fn renew_pause(&self) -> Duration {
        // Several attempts fit in the renew deadline; retry_period < renew_deadline.
        (self.config.retry_period / 2).max(Duration::from_millis(10))
    }

    /// Clear `holderIdentity` if it is still ours (the object stays, so its transition count
    /// and history are kept).
    async fn clear(&self) -> Result<bool, LeaseError> {
        let Some(mut lease) = self.read().await? else {
            return Ok(false);
        };
        let Some(spec) = lease.spec.as_mut() else {
            return Ok(false);
        };
        if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            return Ok(false);
        }
        spec.holder_identity = None;
        spec.renew_time = Some(MicroTime(Timestamp::now()));
        self.replace(&lease).await?;
        self.remember(None);
        Ok(true)
    }
}

/// Wait until `config.identity` holds the Lease, then keep it renewed in a background task.
///
/// Retries every `retry_period` while someone else holds it; read and write errors are logged
/// and retried, except those no retry can fix (forbidden, invalid), which are returned, as is an
/// invalid `config`. Cancel by dropping the future.
pub async fn acquire(client: kube::Client, config: LeaseConfig) -> Result<Leadership, LeaseError> {
    config.validate()?;
    let contender = Contender {
        api: Api::namespaced(client, &config.namespace),
        config,
        written: Default::default(),
    };
    let mut last_holder: Option<Option<String>> = None;
    loop {
        let started = Instant::now();
        match contender.round(true).await {
            Ok(Round::Held) => {
                let leadership = Leadership::start(contender.clone(), started);
                if let Some(previous) = &contender.config.previous_name {
                    wait_until_unheld(&contender, previous).await?;
                }
                return Ok(leadership);
            }
            Ok(Round::Other { holder, remaining }) => {
                if last_holder.as_ref() != Some(&holder) {
                    tracing::info!(
                        lease = %contender.config.name,
                        holder = holder.as_deref().unwrap_or_default(),
                        expires_in = ?remaining,
                        "waiting for the lease"
                    );
                    last_holder = Some(holder);
                }
            }
            // Someone else wrote between our read and write: re-read now.
            Err(error) if error.is_conflict() => continue,
            Err(error) if error.is_permanent() => return Err(error),
            Err(error) => {
                tracing::warn!(%error, lease = %contender.config.name, "lease attempt failed; retrying");
            }
        }
        tokio::time::sleep(contender.config.retry_period).await;
    }
}

/// [`acquire`], on a thread of its own: its own single-threaded runtime and its own API client
/// (its own connections), built from `kube_config`. Renewals then never wait for the
/// controller: not for its runtime's workers (100 reconciles at once kept them busy for
/// seconds, issue 24), nor behind its requests in a shared client. Dropping the returned
/// [`Leadership`] stops renewing, [`Leadership::release`] clears the Lease, as with [`acquire`].
pub async fn acquire_on_own_thread(
    kube_config: kube::Config,
    config: LeaseConfig,
) -> Result<Leadership, LeaseError> {
    let identity = config.identity.clone();
    let (acquired_tx, acquired) = oneshot::channel();
    let (release, release_rx) = oneshot::channel::<()>();
    let (released_tx, released) = oneshot::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("leader-election".into())
        .spawn(move || {
            elect_on_this_thread(kube_config, config, acquired_tx, release_rx, released_tx)
        })
        .map_err(|e| LeaseError::OwnThread {
            detail: e.to_string(),
        })?;
    drop(thread);
    match acquired.await {
        Ok(Ok(shared)) => Ok(Leadership {
            identity,
            lost: shared.lost,
            valid_until: shared.valid_until,
            fences_process: shared.fences_process,
            holder: Holder::OwnThread {
                release: Some(release),
                released: Some(released),
            },
        }),
        Ok(Err(error)) => Err(error),
        Err(_) => Err(LeaseError::OwnThread {
            detail: "the thread ended without an answer".into(),
        }),
    }
}

/// What the Leadership on the election thread shares with the caller's: whether it was lost,
/// until when it is surely held, and whether the renewals move the process-wide fence.
struct SharedState {
    lost: watch::Receiver<bool>,
    valid_until: watch::Receiver<Instant>,
    fences_process: Arc<AtomicBool>,
}

/// The body of [`acquire_on_own_thread`]'s thread: acquire, report, then keep the runtime (and
/// so the renew task) running until the caller releases or drops its [`Leadership`].
fn elect_on_this_thread(
    kube_config: kube::Config,
    config: LeaseConfig,
    mut acquired: oneshot::Sender<Result<SharedState, LeaseError>>,
    release: oneshot::Receiver<()>,
    released: oneshot::Sender<()>,
) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            let _ = acquired.send(Err(LeaseError::OwnThread {
                detail: format!("runtime: {e}"),
            }));
            return;
        }
    };
    runtime.block_on(async move {
        let client = match kube::Client::try_from(kube_config) {
            Ok(client) => client,
            Err(e) => {
                let _ = acquired.send(Err(LeaseError::OwnThread {
                    detail: format!("API client: {e}"),
                }));
                return;
            }
        };
        let outcome = tokio::select! {
            outcome = acquire(client, config) => outcome,
            // The caller stopped waiting (its acquire future was dropped).
            () = acquired.closed() => return,
        };
        let leadership = match outcome {
            Ok(leadership) => leadership,
            Err(error) => {
                let _ = acquired.send(Err(error));
                return;
            }
        };
        let shared = SharedState {
            lost: leadership.lost.clone(),
            valid_until: leadership.valid_until.clone(),
            fences_process: leadership.fences_process.clone(),
        };
        if acquired.send(Ok(shared)).is_err() {
            return;
        }
        match release.await {
            Ok(()) => {
                leadership.release().await;
                let _ = released.send(());
            }
            // The caller's Leadership was dropped: stop renewing, as a crash would.
            Err(_) => drop(leadership),
        }
    });
}

/// Waits until nobody holds the Lease `name` (absent, released, or expired), renewing ours
/// meanwhile (the renew task runs). Errors as [`acquire`]'s.
async fn wait_until_unheld(contender: &Contender, name: &str) -> Result<(), LeaseError> {
    let api = &contender.api;
    let mut logged = false;
    loop {
        match api.get_opt(name).await {
            Ok(lease) => {
                let spec = lease.and_then(|l| l.spec);
                // Nobody can be "" : a held, unexpired Lease is a Wait for any identity but its holder's.
                match decide(spec.as_ref(), "", Timestamp::now()) {
                    Decision::Create | Decision::Take | Decision::Renew => return Ok(()),
                    Decision::Wait(remaining) => {
                        if !logged {
                            tracing::info!(
                                lease = name,
                                holder = spec.and_then(|s| s.holder_identity).unwrap_or_default(),
                                expires_in = ?remaining,
                                "holding our lease; waiting for the previous release's replica to let go of its lease"
                            );
                            logged = true;
                        }
                    }
                }
            }
            Err(source) => {
                let error = LeaseError::Read {
                    namespace: contender.config.namespace.clone(),
                    name: name.to_owned(),
                    source,
                };
                if error.is_permanent() {
                    return Err(error);
                }
                tracing::warn!(%error, "reading the previous lease failed; retrying");
            }
        }
        tokio::time::sleep(contender.config.retry_period).await;
    }
}

/// Holding the Lease. Dropping it stops renewing (as a crash would: others take over after the
/// lease duration); [`Leadership::release`] hands over at once.
pub struct Leadership {
    identity: String,
    lost: watch::Receiver<bool>,
    /// Until when (local monotonic clock) the Lease is surely ours: [`valid_until`].
    valid_until: watch::Receiver<Instant>,
    /// Whether the process-wide stale-leader fence follows this Leadership (shared with the
    /// renewals, which move the fence on at each renewal, on whichever thread they run).
    fences_process: Arc<AtomicBool>,
    holder: Holder,
}

/// Where the renewals run.
enum Holder {
    /// A task on the caller's runtime ([`acquire`]).
    Task {
        contender: Box<Contender>,
        stop: Option<oneshot::Sender<()>>,
        task: Option<JoinHandle<()>>,
    },
    /// A thread of its own ([`acquire_on_own_thread`]): sending on `release` releases there,
    /// `released` answers when done; dropping `release` stops renewing.
    OwnThread {
        release: Option<oneshot::Sender<()>>,
        released: Option<oneshot::Receiver<()>>,
    },
}

/// The local monotonic time until which a Lease renewed by a request started at `renew_started`
/// is surely ours: `renew_started + lease_duration - margin`, the margin being
/// `lease_duration - renew_deadline` (for clock rates and a write in flight; positive, as
/// `validate` requires). Others take it over only after `renewTime + lease_duration` on their
/// clock, and `renewTime` is written after `renew_started`. Pure.
pub fn valid_until(renew_started: Instant, config: &LeaseConfig) -> Instant {
    let margin = config.lease_duration.saturating_sub(config.renew_deadline);
    renew_started + config.lease_duration.saturating_sub(margin)
}

impl Leadership {
    fn start(contender: Contender, renewed_at: Instant) -> Leadership {
        let (lost_tx, lost) = watch::channel(false);
        let (valid_tx, valid_until_rx) = watch::channel(valid_until(renewed_at, &contender.config));
        let fences_process = Arc::new(AtomicBool::new(false));
        let (stop, stop_rx) = oneshot::channel();
        let task = tokio::spawn(renew_loop(
            contender.clone(),
            renewed_at,
            Renewals {
                lost: lost_tx,
                valid_until: valid_tx,
                fences_process: fences_process.clone(),
            },
            stop_rx,
        ));
        Leadership {
            identity: contender.config.identity.clone(),
            lost,
            valid_until: valid_until_rx,
            fences_process,
            holder: Holder::Task {
                contender: Box::new(contender),
                stop: Some(stop),
                task: Some(task),
            },
        }
    }

    /// Until when (local monotonic clock) the Lease is surely ours, as of the last renewal.
    pub fn valid_until(&self) -> Instant {
        *self.valid_until.borrow()
    }

    /// Makes the process-wide stale-leader fence ([`failpoint::fence`]) follow this Leadership:
    /// every side effect of the process is refused (the process exits) once past
    /// [`Leadership::valid_until`], and for good once leadership is lost or released. For the
    /// operator binaries (one Leadership per process), not for tests that run several.
    pub fn fence_process(&self) {
        self.fences_process.store(true, Ordering::SeqCst);
        failpoint::fence::hold_until(self.valid_until().into_std());
        if self.is_lost() {
            failpoint::fence::revoke();
        }
    }

    /// The identity holding the Lease.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Resolves once leadership is lost: renewal failed for `renew_deadline`, or another
    /// identity took or cleared the Lease. The caller must stop acting at once. Cancel-safe.
    pub async fn lost(&mut self) {
        // An Err means the renew task ended without saying so (it panicked): not renewing any
        // more is losing.
        let _ = self.lost.wait_for(|lost| *lost).await;
    }

    /// Whether leadership was lost already (non-blocking).
    pub fn is_lost(&self) -> bool {
        if *self.lost.borrow() {
            return true;
        }
        match &self.holder {
            Holder::Task { task, .. } => task.as_ref().is_none_or(JoinHandle::is_finished),
            // The renew task's sender is gone: its thread ended.
            Holder::OwnThread { .. } => self.lost.has_changed().is_err(),
        }
    }

    /// Graceful shutdown: stop renewing and clear `holderIdentity` (keeping the object), so a
    /// standby takes over at its next retry instead of after the lease duration. Failures are
    /// logged; the Lease then simply expires.
    pub async fn release(mut self) {
        if self.fences_process.load(Ordering::SeqCst) {
            failpoint::fence::revoke();
        }
        let lost = *self.lost.borrow();
        match &mut self.holder {
            Holder::Task {
                contender,
                stop,
                task,
            } => {
                if let Some(stop) = stop.take() {
                    let _ = stop.send(());
                }
                if let Some(task) = task.take() {
                    let _ = task.await;
                }
                if !lost {
                    release_lease(contender).await;
                }
            }
            Holder::OwnThread { release, released } => {
                if let (Some(release), Some(released)) = (release.take(), released.take())
                    && release.send(()).is_ok()
                {
                    let _ = released.await;
                }
            }
        }
    }
}

/// Clears the Lease if it is still ours, within the renew deadline.
async fn release_lease(contender: &Contender) {
    let deadline = Instant::now() + contender.config.renew_deadline;
    loop {
        match tokio::time::timeout_at(deadline, contender.clear()).await {
            Ok(Ok(cleared)) => {
                if cleared {
                    tracing::info!(lease = %contender.config.name, "released leadership");
                }
                return;
            }
            Ok(Err(error)) if error.is_conflict() => {}
            Ok(Err(error)) => {
                tracing::warn!(%error, lease = %contender.config.name, "releasing the lease failed");
                if Instant::now() + contender.renew_pause() >= deadline {
                    return;
                }
                tokio::time::sleep(contender.renew_pause()).await;
            }
            Err(_elapsed) => {
                tracing::warn!(lease = %contender.config.name, "releasing the lease timed out; it will expire");
                return;
            }
        }
    }
}

impl Drop for Leadership {
    fn drop(&mut self) {
        if self.fences_process.load(Ordering::SeqCst) {
            failpoint::fence::revoke();
        }
        if let Holder::Task { task, .. } = &mut self.holder
            && let Some(task) = task.take()
        {
            task.abort();
        }
        // OwnThread: dropping `release` tells the thread to stop renewing.
    }
}

/// Where the renew task reports.
struct Renewals {
    lost: watch::Sender<bool>,
    valid_until: watch::Sender<Instant>,
    fences_process: Arc<AtomicBool>,
}

impl Renewals {
    fn renewed(&self, until: Instant) {
        let _ = self.valid_until.send(until);
        if self.fences_process.load(Ordering::SeqCst) {
            failpoint::fence::hold_until(until.into_std());
        }
    }

    fn lost(&self) {
        if self.fences_process.load(Ordering::SeqCst) {
            failpoint::fence::revoke();
        }
        let _ = self.lost.send(true);
    }
}

/// Renew every `retry_period`; declare the Lease lost when another identity holds it or when no
/// renewal succeeded for `renew_deadline` (measured from when the last successful attempt began,
/// which is no later than the `renewTime` others see).
async fn renew_loop(
    contender: Contender,
    mut renewed_at: Instant,
    report: Renewals,
    mut stop: oneshot::Receiver<()>,
) {
    let config = &contender.config;
    loop {
        tokio::select! {
            _ = &mut stop => return,
            () = tokio::time::sleep(config.retry_period) => {}
        }
        let attempt_started = Instant::now();
        let deadline = renewed_at + config.renew_deadline;
        let outcome = tokio::select! {
            _ = &mut stop => return,
            outcome = tokio::time::timeout_at(deadline, contender.renew()) => outcome,
        };
        match outcome {
            Ok(Ok(())) => {
                renewed_at = attempt_started;
                report.renewed(valid_until(attempt_started, config));
            }
            Ok(Err(holder)) => {
                tracing::warn!(
                    lease = %config.name,
                    holder = holder.as_deref().unwrap_or_default(),
                    "lost leadership: another identity holds the lease"
                );
                report.lost();
                return;
            }
            Err(_elapsed) => {
                tracing::warn!(
                    lease = %config.name,
                    renew_deadline = ?config.renew_deadline,
                    "lost leadership: could not renew within the renew deadline"
                );
                report.lost();
                return;
            }
        }
    }
}

/// This replica's identity in a Lease: the Pod name (`POD_NAME` from the downward API), else the
/// hostname (a Pod's hostname is its name). Never a PID (1 in every container) nor a fixed
/// default: two replicas with one identity would both believe they hold the Lease.
pub fn lease_identity(
    pod_name: Option<&str>,
    hostname: Option<&str>,
) -> Result<String, LeaseError> {
    [pod_name, hostname]
        .into_iter()
        .flatten()
        .map(str::trim)
        .find(|name| !name.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| LeaseError::InvalidConfig {
            field: "identity",
            detail: "neither POD_NAME nor the hostname is set: two replicas could share one".into(),
        })
}

/// The machine's hostname (in a Pod, the Pod's name), if it can be read.
pub fn hostname() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 17: two replicas must never share an identity, or both believe they hold the
    /// Lease. A PID is 1 in every container and a fixed default is the same everywhere: the Pod
    /// name, else the hostname (a Pod's hostname is its name), else no leader election at all.
    #[test]
    fn the_lease_identity_is_the_pod_name_or_the_hostname_never_a_shared_default() {
        assert_eq!(
            lease_identity(Some("op-7d9f-x2"), Some("host")).unwrap(),
            "op-7d9f-x2"
        );
        assert_eq!(
            lease_identity(None, Some("op-7d9f-y3")).unwrap(),
            "op-7d9f-y3"
        );
        assert_eq!(lease_identity(Some(" "), Some("op-y3\n")).unwrap(), "op-y3");
        assert!(matches!(
            lease_identity(None, None),
            Err(LeaseError::InvalidConfig { .. })
        ));
        assert!(lease_identity(Some(""), Some("")).is_err());
    }

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).unwrap()
    }

    fn held_by(holder: Option<&str>, renewed: Option<i64>, duration: Option<i32>) -> LeaseSpec {
        LeaseSpec {
            holder_identity: holder.map(str::to_owned),
            renew_time: renewed.map(|s| MicroTime(at(s))),
            lease_duration_seconds: duration,
            ..LeaseSpec::default()
        }
    }

    #[test]
    fn decide_table() {
        let ms = Duration::from_millis;
        let cases: Vec<(&str, Option<LeaseSpec>, i64, Decision)> = vec![
            ("no lease object", None, 0, Decision::Create),
            (
                "object without holder",
                Some(LeaseSpec::default()),
                0,
                Decision::Take,
            ),
            (
                "holder cleared by release",
                Some(held_by(None, Some(0), Some(15))),
                1,
                Decision::Take,
            ),
            (
                "empty holder string",
                Some(held_by(Some(""), Some(0), Some(15))),
                1,
                Decision::Take,
            ),
            (
                "ours and fresh",
                Some(held_by(Some("me"), Some(0), Some(15))),
                1,
                Decision::Renew,
            ),
            (
                "ours and expired",
                Some(held_by(Some("me"), Some(0), Some(15))),
                100,
                Decision::Renew,
            ),
            (
                "someone else's, fresh",
                Some(held_by(Some("other"), Some(0), Some(15))),
                5,
                Decision::Wait(ms(10_000)),
            ),
            (
                "someone else's, just renewed",
                Some(held_by(Some("other"), Some(0), Some(15))),
                0,
                Decision::Wait(ms(15_000)),
            ),
            (
                "someone else's, renewed in our future (skew)",
                Some(held_by(Some("other"), Some(10), Some(15))),
                0,
                Decision::Wait(ms(25_000)),
            ),
            (
                "clock edge: expires exactly now",
                Some(held_by(Some("other"), Some(0), Some(15))),
                15,
                Decision::Wait(Duration::ZERO),
            ),
            (
                "clock edge: one second past",
                Some(held_by(Some("other"), Some(0), Some(15))),
                16,
                Decision::Take,
            ),
            (
                "someone else's, expired long ago",
                Some(held_by(Some("other"), Some(0), Some(15))),
                3600,
                Decision::Take,
            ),
            (
                "holder without renewTime",
                Some(held_by(Some("other"), None, Some(15))),
                0,
                Decision::Take,
            ),
            (
                "holder without duration",
                Some(held_by(Some("other"), Some(0), None)),
                1,
                Decision::Take,
            ),
            (
                "negative duration",
                Some(held_by(Some("other"), Some(0), Some(-5))),
                1,
                Decision::Take,
            ),
        ];
        for (what, spec, now, expected) in cases {
            assert_eq!(decide(spec.as_ref(), "me", at(now)), expected, "{what}");
        }
    }

    /// Issue 18: the fence (writes refused, the process exiting) falls at the renewal's start
    /// plus the lease duration less the margin, which with client-go's timings is the renew
    /// deadline: 5 s before any standby may take the Lease.
    #[test]
    fn the_fence_falls_a_margin_before_others_may_take_the_lease() {
        let config = LeaseConfig::new("ns", "lease", "me");
        let started = Instant::now();
        let until = valid_until(started, &config);
        assert_eq!(until, started + Duration::from_secs(10));
        let fence = failpoint::fence::Fence::HeldUntil(until.into_std());
        let at = |secs: f64| (started + Duration::from_secs_f64(secs)).into_std();
        assert!(fence.permits(at(0.0)));
        assert!(fence.permits(at(9.9)));
        assert!(!fence.permits(at(10.0)), "refused at valid_until");
        // A process SIGSTOPped for 70 s with a reconcile in flight resumes far past it.
        assert!(!fence.permits(at(70.0)));
        // Before the standby's earliest takeover (renewTime + lease duration).
        assert!(until < started + config.lease_duration);
    }

    #[test]
    fn decide_clock_edge_sub_second() {
        let spec = held_by(Some("other"), Some(0), Some(15));
        let just_after = at(15).checked_add(SignedDuration::from_micros(1)).unwrap();
        let just_before = at(15).checked_sub(SignedDuration::from_micros(1)).unwrap();
        assert_eq!(decide(Some(&spec), "me", just_after), Decision::Take);
        assert_eq!(
            decide(Some(&spec), "me", just_before),
            Decision::Wait(Duration::from_micros(1))
        );
    }

    #[test]
    fn next_spec_counts_transitions_only_on_a_change_of_holder() {
        let config = LeaseConfig::new("ns", "lease", "me");
        let now = at(50);
        let created = next_spec(None, &Decision::Create, &config, now).unwrap();
        assert_eq!(created.holder_identity.as_deref(), Some("me"));
        assert_eq!(created.lease_transitions, Some(0));
        assert_eq!(created.lease_duration_seconds, Some(15));
        assert_eq!(created.acquire_time, Some(MicroTime(now)));
        assert_eq!(created.renew_time, Some(MicroTime(now)));

        let mut theirs = held_by(Some("other"), Some(0), Some(15));
        theirs.lease_transitions = Some(4);
        theirs.acquire_time = Some(MicroTime(at(-100)));
        let taken = next_spec(Some(&theirs), &Decision::Take, &config, now).unwrap();
        assert_eq!(taken.holder_identity.as_deref(), Some("me"));
        assert_eq!(taken.lease_transitions, Some(5));
        assert_eq!(taken.acquire_time, Some(MicroTime(now)));

        let renewed = next_spec(Some(&taken), &Decision::Renew, &config, at(52)).unwrap();
        assert_eq!(renewed.lease_transitions, Some(5));
        assert_eq!(renewed.acquire_time, Some(MicroTime(now)));
        assert_eq!(renewed.renew_time, Some(MicroTime(at(52))));

        assert_eq!(
            next_spec(Some(&theirs), &Decision::Wait(Duration::ZERO), &config, now),
            None
        );
    }

    #[test]
    fn config_defaults_and_validation() {
        let config = LeaseConfig::new("ns", "lease", "pod-0");
        assert_eq!(config.lease_duration, Duration::from_secs(15));
        assert_eq!(config.renew_deadline, Duration::from_secs(10));
        assert_eq!(config.retry_period, Duration::from_secs(2));
        assert!(config.validate().is_ok());

        let short = LeaseConfig {
            lease_duration: Duration::from_millis(1500),
            renew_deadline: Duration::from_secs(1),
            retry_period: Duration::from_millis(300),
            ..config.clone()
        };
        assert!(short.validate().is_ok());
        assert_eq!(short.lease_duration_seconds(), Some(2), "rounded up");

        let bad = [
            (
                "identity",
                LeaseConfig {
                    identity: String::new(),
                    ..config.clone()
                },
            ),
            (
                "retry_period",
                LeaseConfig {
                    retry_period: Duration::ZERO,
                    ..config.clone()
                },
            ),
            (
                "renew_deadline",
                LeaseConfig {
                    renew_deadline: Duration::from_secs(2),
                    ..config.clone()
                },
            ),
            (
                "lease_duration",
                LeaseConfig {
                    lease_duration: Duration::from_secs(10),
                    ..config.clone()
                },
            ),
            (
                "lease_duration",
                LeaseConfig {
                    lease_duration: Duration::from_secs(u64::MAX),
                    ..config.clone()
                },
            ),
        ];
        for (field, config) in bad {
            match config.validate() {
                Err(LeaseError::InvalidConfig { field: f, .. }) => assert_eq!(f, field),
                other => panic!("{field}: expected InvalidConfig, got {other:?}"),
            }
        }
    }
}
