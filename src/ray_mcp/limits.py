"""Every bound on what ray-mcp reads, keeps and sends back to an agent, named once.

Tool parameters (their ``le``/``ge`` and the numbers in their descriptions), the adapter's requests, the
shaping code and the diagnosis all read these; changing an output size means changing this file (and
tests/test_limits.py fails on a bound written anywhere else). An agent's context window is the scarce
resource: every answer is bounded, and says what it left out. A size the agent picks per call is a ``Bound``:
the parameter's default and the range its schema accepts, together. Timeouts, polling intervals and cache
sizes are settings (settings.py) or behaviour, kept where they act; the few here (wait and follow times an
agent picks, the API reference's workers and cache, grep's threads, a confirm token's life) bound a tool's
work the way its sizes do.
"""

from dataclasses import dataclass
from typing import Generic, TypeVar

Number = TypeVar("Number", int, float)


@dataclass(frozen=True)
class Bound(Generic[Number]):
    """A size an agent picks per call: its default, and the least and most the tool's schema accepts."""

    default: Number
    low: Number
    high: Number

    def __post_init__(self) -> None:
        if not self.low <= self.default <= self.high:
            raise ValueError(f"{self}: the default must lie between low and high")


# -- lists: actors, tasks, placement groups, nodes --------------------------------------------------------

MAX_LIMIT = 1000  # the most items one list call may ask for (0 means counts only)
DEFAULT_LIMIT = 50  # actors, placement groups, nodes
DEFAULT_TASK_LIMIT = 30
# A whole answer as sent stays under this, text and structured content together: the edge
# (shaping.common.tool_result) leaves out a list page's last items to keep it there.
RESPONSE_BUDGET_BYTES = 8 * 1024
# The fitter measures this many items first and guesses how many fit from them (not an output bound: any
# value gives the same answer, this one the fewest renders at default limits).
FIT_SAMPLE_ITEMS = 16
STATE_API_MAX_ROWS = 10_000  # Ray's State API returns at most this many rows per call
# list_actors reads up to this many matching actors in its one request and counts them by class and state
# itself; past it, Ray's summary counts them (Ray converts every actor once per request either way).
ACTORS_COUNTED = 1000
MAX_TASK_GROUPS = 40  # task names shown by summarize_tasks
MAX_ERROR_TYPES_SAMPLED = 10  # error types of failed tasks that get a sample task
BUNDLES_SHOWN = 8  # bundles of one placement group in the text answer
LIST_FIELD_CHARS = 200  # one-line fields of a list row (entrypoint, first error line)
FIELD_CHARS = 500  # a field shown in full elsewhere (metadata, runtime_env, a death message)
LINE_CHARS = 300  # one line quoted from Ray (a message, a replica's log line, a cause in a list)
QUOTED_CHARS = 120  # a name or value from the cluster quoted inside one of our own sentences
MAX_ARGUMENT_ERRORS = 5  # fields named in one "arguments refused" error
AUDIT_ARGUMENT_CHARS = (
    65_536  # one string argument in an audit record; longer ones are cut, marked and listed
)
DOCTOR_APPS_NAMED = 10  # Serve apps not running that `ray-mcp doctor` names (the others are counted)
AUDIT_ERROR_CHARS = 2_000  # the error text of a failed call in its audit record (cut, marked and listed)

# -- every answer: its structured content, and the result as a client receives it ---------------------------

# Structured content may always be this big, or STRUCTURED_TEXT_FACTOR times its text, whichever is more (it
# is bounded as the text is), and never more than STRUCTURED_MAX_BYTES: past that, guard/bounds.py cuts it.
STRUCTURED_MIN_BYTES = 16_384
STRUCTURED_TEXT_FACTOR = 2
STRUCTURED_MAX_BYTES = 1_048_576
MAX_MODEL_KEYS = 200  # a map with other than string values is cut only past this (models have fewer fields)
STRUCTURED_CUT_FIELDS_CHARS = 300  # the cut fields named in the note that says structured content was cut
# What a tool result adds around its text and structured content as sent (the content list, type, isError,
# _meta with the server's name, version and icon URL, resultType), with room to spare: what a whole-answer budget
# leaves for it (tests/test_whole_results.py measures it).
RESULT_ENVELOPE_BYTES = 300

# -- errors (errors.py) ----------------------------------------------------------------------------------------

DASHBOARD_BODY_CHARS = 300  # a dashboard's error body quoted in an error (one line is enough to say why)
RAY_ERROR_CHARS = 400  # Ray's own error text (the Jobs SDK's, the log endpoint's) quoted in an error

# -- cluster_status ------------------------------------------------------------------------------------------

STATUS_NODES = Bound(default=20, low=1, high=1000)  # nodes listed one by one (all are counted)
FAILED_NODES_SHOWN = 5
PRESSURE_NODES_NAMED = 5  # nodes under memory pressure named in the hint (all are counted)
# Host CPU/memory/GPU use is read (/nodes?view=summary, whose size grows with every worker) up to this many
# alive nodes; a larger cluster gets a note instead.
HOST_USAGE_MAX_NODES = 256
GPUS_SHOWN = 8  # GPUs of one node listed by name and use (a node has at most 8 in the common shapes)

# -- actors --------------------------------------------------------------------------------------------------

EXCEPTION_CHARS = 2000  # an actor's death exception, in get_actor and with detail
EXCEPTION_CHARS_IN_LIST = LINE_CHARS  # the same in a list without detail

# -- tasks ---------------------------------------------------------------------------------------------------

TASK_ERROR_CHARS = 400
SAMPLE_ERROR_CHARS = 600  # the sample error message of one error type

# -- jobs ----------------------------------------------------------------------------------------------------

JOBS_LIMIT = Bound(default=20, low=1, high=500)
DEFAULT_WAIT_S = 60.0  # wait_for_job's timeout_s: any number above 0, up to MAX_WAIT_S
MAX_WAIT_S = 600.0
JOB_MESSAGE_CHARS = 1200  # Ray puts up to 20,000 characters of driver log in a failed job's message
JOB_MESSAGE_HEAD_CHARS = 300  # of which the first line keeps this many
JOB_ID_CHARS = 256  # the longest job id or submission id accepted
ERROR_PAGE_LINKS = 2  # reference pages an error links to, for the Ray concepts it names
LINKED_JOBS = 10  # list_jobs links the resources of its first shown jobs, no more

# -- completion/complete (server/completions.py) ------------------------------------------------------------

COMPLETIONS_SHOWN = 50  # values in one answer (the spec allows 100)
COMPLETION_READ = 200  # items read from the cluster to complete from
COMPLETION_CACHE_S = 5.0  # one read per cluster and kind serves the keystrokes within this

# -- cache hints (server/cache_hints.py) ------------------------------------------------------------------

LIST_CACHE_MS = (
    300_000  # tools, prompts, resources and templates lists (tools/list: announced when it changes)
)
REFERENCE_CACHE_MS = 86_400_000  # a reference page or API page: package data, or the installed Ray's source

# -- toolsets (server/toolsets.py): reading whether Serve and Train run -------------------------------------
TOOLSET_LIST_WAIT_S = (
    1.5  # a tools/list waits this long for a read of the cluster's facts, then lists without
)
TOOLSET_READ_S = 5.0  # the State API reads that find Serve's controller and Train's state actor
TOOLSET_RECHECK_S = 60.0  # facts older than this are read again (in the background) at the next list or call

# -- MCP tasks (server/mcp_tasks.py) -------------------------------------------------------------------------

TASK_POLL_MS = 2000  # the pollIntervalMs a task suggests
TASK_ID_CHARS = 600  # the longest task id accepted: job:<sealed cluster and submission id>.<HMAC>
MAX_LOCAL_TASKS = (
    32  # cpu_profile and tail_logs calls running here as tasks at once; more get blocking answers
)
LOCAL_TASK_TTL_S = 900.0  # how long such a task (and its answer) is kept after it starts

# -- logs ----------------------------------------------------------------------------------------------------

LOG_LINES = Bound(default=100, low=1, high=2000)
# A tail is the first follow-up of a diagnosis: by default the whole answer (the lines come twice, in the text
# and the structured content) stays under RESPONSE_BUDGET_BYTES. max_bytes asks for more.
LOG_BYTES = Bound(default=3_500, low=256, high=1_048_576)
# The whole answer as a client receives it (the lines twice, each as an escaped JSON string: a quote or a
# backslash takes 2 bytes, a control character 5-7), at most this share of max_bytes (8,000 at the default).
LOG_WHOLE_SHARE = 16 / 7
MAX_GREP_CONTEXT = 20  # lines around each grep match
MAX_FOLLOW_S = 120.0
SCAN_MB = Bound(default=256, low=1, high=8192)  # grep stops scanning after this many MB
# A follow re-reads the log's last lines when its stream opens and drops those the tail already showed: lines
# appended between the two reads are kept, not lost (a burst longer than this between them is not seen).
FOLLOW_OVERLAP_LINES = 200
LOG_FOLLOWS_MAX = (
    16  # tail_logs follows at once (each holds a dashboard connection): DASHBOARD_CONNECTIONS stay
)
LOG_FOLLOWS_PER_CLIENT = 4  # ... and per caller (its HTTP address and credential; the stdio connection)
DASHBOARD_CONNECTIONS = 100  # the dashboard client's connection pool (per cluster)
PROGRESS_CHARS = 1000  # the log lines of one progress notification while following a log
FILES_LISTED = 25  # files named when a log file is not found on a node

# -- Serve ---------------------------------------------------------------------------------------------------

SERVE_LOG_LINES = Bound(default=15, low=0, high=100)  # log lines of each failing deployment's replica
MAX_REPLICAS_SHOWN = 10  # replicas of one deployment
SERVE_ERROR_CHARS = 1500  # the error of a failing application or deployment
FAILING_DEPLOYMENTS_WITH_LOGS = 3
SERVE_PROBLEMS = 5  # problems quoted from the dashboard's rejection of a Serve config
SERVE_DECISIONS = 5  # autoscaling decisions shown per deployment, newest first
SERVE_METRICS_SHOWN = 8  # autoscaler metrics shown per deployment (autoscaling_detail.metrics)
SERVE_AUTOSCALER_ERRORS = 3  # autoscaler errors quoted per deployment
# lines read from the end of the Serve controller's log for its decisions (Ray 2.60 leaves autoscaling_detail null)
SERVE_CONTROLLER_LOG_LINES = 2_000
SERVE_CONTROLLER_LOG_BYTES = 400_000
SERVE_CONTROLLER_LAG_S = 1.0  # the controller's event loop wakes this much late: it is overloaded

# -- the secret registry (guard/redaction/) ------------------------------------------------------------------

# its memory (values, automaton, entries; Settings.secret_registry_mib sets it): at the bound, new owners are
# refused and answers withheld, never a held value dropped
SECRET_REGISTRY_MIB = 16
SECRET_KEY_CHARS = 16  # a value is found by its first characters, then masked as far as the text agrees
SECRET_BYTES_PER_KEY_CHAR = 64  # what one key character costs in the automaton (measured: ~48 B)
SECRET_ENTRY_BYTES = 256  # a value's entries in the registry's tables
SECRETS_RECENT_KEY_CHARS = 4096  # values added since the last full build, in their own small automaton
REFUSED_OWNERS_KEPT = 64  # owners named as refused, newest first
EXTRA_SECRETS_MAX = 1024  # one structure's own secrets masked wherever they occur in it
TOKEN_FILE_BYTES = 4096  # a larger Ray token file is not read as a token

# -- job resources (ray://jobs/<submission_id>) and their subscriptions --------------------------------------

MAX_WATCHED_JOBS = 64  # jobs watched at once across sessions (one poll each); another subscribe is refused
WATCHES_PER_SESSION = 8  # jobs one client connection may watch: the rest stay for the others
JOB_LOG_TAIL_LINES = 40  # the driver log's tail in a job resource: its newest lines, tail_logs reads more
JOB_LOG_TAIL_BYTES = 8_192

# -- the cluster's health resource (ray://cluster/health) and its subscriptions -------------------------------

HEALTH_WATCHES_PER_SESSION = 4  # clusters one client connection may watch (one shared poller per cluster)
HEALTH_POLL_S = (
    5.0  # one cluster_health round per watched cluster this often (measured: 0.08 s a round, idle head)
)
HEALTH_CHANGES_SHOWN = 12  # the changes of the last notification the resource lists; the rest are counted
ALERTS_READ = 200  # firing Prometheus alerts a round takes in (newest first); the rest are counted

# -- diagnose_job and cluster_health: the answer -------------------------------------------------------------

# the text answer (its findings come again in the structured content)
DIAGNOSIS_BYTES = Bound(default=6_000, low=1_000, high=32_000)
# the text and the structured content together: at most this share of the text budget
DIAGNOSIS_WHOLE_SHARE = 4 / 3
VERDICT_BYTES = 300  # the verdict line, first in the answer: a status, a symptom and its last link
MIN_QUOTE_CHARS = 100  # the structured answer's quotes are cut to no less before they are left out
EVIDENCE_ITEMS = 12  # evidence lines of one finding
CHAIN_EVIDENCE_ITEMS = 14  # evidence lines of a chain's finding: its links' words and quotes, two per link
NEXT_STEPS = 3  # next steps (and references) of one finding
FINDING_TITLE_CHARS = 400  # a chain's finding title: its symptom and its cause, both in Ray's words
ALIKE_SHOWN = 3  # titles of the alike findings quoted in the one that stands for them
NOTES_SHOWN = 5  # notes of a diagnosis (what could not be read or checked), within the footer's share
UNREADABLE_NOTED = 3  # sources that could not be read, one note each, before the other notes
UNCHECKED_CHARS = 100  # the checks that could not run, named in diagnose_job's verdict
HEALTH_UNCHECKED_CHARS = 120  # the same in cluster_health's verdict (it runs more checks)
EXPLAINING_EVENTS = 4  # cluster events that explain diagnose_job's findings (OOM kills, node deaths)
HEALTH_EVENTS = 6  # cluster events in cluster_health's answer, newest first
EVENT_CHARS = 200  # one cluster event's message, in an event line or a node death's quote
JOB_LINE_ENTRYPOINT_CHARS = 80  # the entrypoint in diagnose_job's job line
OTHER_JOBS_NAMED = 4  # other failed jobs named in diagnose_job's note on them
EVIDENCE_LINE_CHARS = 240  # one quoted log or traceback line
CAUSE_CHARS = 200  # a cause named in a finding's title or evidence
SHORT_CAUSE_CHARS = 160  # a cause in a link's words or in a grouped line (N actors died of ...)
JOB_CAUSE_HEAD_CHARS = 120  # the head of a failed job's message, when it has no traceback
TRACEBACK_LINES = 24  # lines of the excerpt of a traceback
TRACEBACK_HEAD_LINES = 3  # of which its first ones ("Traceback ...", the outermost frame) are always kept
REMOTE_LINES_KEPT = 6  # Ray's lines naming where remote work raised ("ray::f() (pid=..."), the newest
ERROR_LINES = 6  # error lines picked out of a long message (pip's output, ...)

# -- diagnose_job and cluster_health: what is read -----------------------------------------------------------

DRIVER_LOG_LINES = 400  # the driver log's tail read for a diagnosis
DRIVER_LOG_BYTES = 96_000
# The evidence graph's State API rows: enough for a job at scale, bounded for a cluster at scale (a list cut
# at its limit says so in the answer).
JOB_ACTORS_READ = 500  # the job's actors
TASKS_READ = 1000  # the job's task attempts; cluster-wide, the tasks of each state read
CLUSTER_ROWS_READ = 2000  # nodes, placement groups, jobs and actors of the whole cluster
EVENTS_READ = 2000  # cluster events: Ray cuts at the limit keeping the oldest, so this is high
DEAD_WORKERS_READ = 500
RELATED_ACTORS_READ = 20  # actors looked up by name or pid (the owner of a lost object, a named actor)
OWNERS_READ = 2  # owner workers (not the driver) of lost objects or orphaned actors looked up
OWNER_SEARCH_TASKS = 50  # failed tasks whose messages are searched for an owner
SERVE_SEARCH_CHARS = 50_000  # the end of the driver log searched for a failed Serve deployment
RUNTIME_ENV_SEARCH_LINES = 120  # the driver log's last lines searched for a runtime_env failure
OWNER_SEARCH_CHARS = 20_000  # the driver log's last characters searched for the actor an ActorDiedError names
RELATED_ACTORS_NAMED = 2  # actors of other jobs an ActorDiedError names, read by id
OWNER_SEARCH_LINES = 40  # the driver log's last lines searched for a dead owner's id
FRAMEWORK_SEARCH_LINES = 200  # the driver log's last lines searched for a library's error (Train, Tune)
SERIALIZATION_SEARCH_LINES = 200  # the driver log's last lines searched for Ray's serialisation report
CONNECT_QUOTE_LINES = 2  # a driver's last failed connection attempts quoted
# Crashed workers' stderr: the newest dead worker of each looping actor, the workers of crashed tasks and of
# crashed actors, CRASH_LOGS in all.
LOOPING_ACTOR_LOGS = 2
CRASHED_TASK_LOGS = 2
CRASH_LOGS = 4
CRASH_LOG_LINES = 40
CRASH_LOG_BYTES = 6_000
DEAD_WORKERS_PER_ACTOR = 20  # a looping actor's dead workers kept with it (its restarts, newest)
# diagnose_job's own reads through the tools' paths
HEALTH_NODES = 50  # nodes cluster_health reads one by one (all are counted)
FAILED_JOBS_SHOWN = 5  # recently failed jobs, read and named in cluster_health
# The per-area checks of cluster_health, run only when the evidence graph could not read actors or nodes.
# A stalled RUNNING job (hang.py): its stacks and the tasks that tell whether it progresses.
HANG_STACK_PROCESSES = 8  # processes whose stacks diagnose_job reads for a stalled job (all their groups)
HANG_STACK_FRAMES = 4  # project frames per stack

# -- diagnose_job and cluster_health: what a finding lists ---------------------------------------------------

DEMANDS_QUOTED = 4  # resource demands that wait (diagnose_job's infeasible ones, cluster_health's others)
INFEASIBLE_DEMANDS_QUOTED = 5  # demands that can never be placed, in cluster_health
RUNTIME_ENV_ERROR_LINES = 8  # error lines of a runtime_env that could not be set up (pip's, conda's)
LAST_OUTPUT_CHARS = 120  # its last output, in the finding's title
DEAD_NODES_SHOWN = 5  # dead nodes, newest first, each with what it took down
DRIVER_WAITS_QUOTED = 4  # the kinds of calls a stalled driver waits on, the odd ones out first
STALL_LINE_CHARS = 300  # the stall finding's title and each of its wait lines
STALL_STACK_GROUPS = 5  # groups of identical stacks quoted in it

# -- diagnose_job and cluster_health: the words of a chain ---------------------------------------------------

QUOTE_CHARS = 300  # Ray's record quoted under a link (a death message, an error, an exit detail)
QUOTE_LINES = 3  # lines of a quote joined from several ("a | b | c")
QUOTE_LINE_CHARS = 200  # each of those lines (and a one-line quote such as a cancel message)
LOG_QUOTE_LINE_CHARS = 160  # a log or traceback line in such a quote
DRIVER_QUOTE_LINES = 4  # the driver's traceback's last lines under the link where it raised
MESSAGE_HEAD_CHARS = 140  # an error or exit message in a link's words, when it has no exception line
INNER_MESSAGE_CHARS = 120  # an inner exception's message in parentheses after the outer one
FATAL_LINE_CHARS = 120  # the fatal line of a crashed worker ("Fatal Python error: ...", a signal)
NODE_DEATH_CHARS = 90  # a node's death message in the link that says it died
MEMORY_USED_CHARS = 80  # the memory monitor's "used / limit" in a link's words
OOM_DETAIL_CHARS = 100  # the memory monitor's kill reason, or the workers it selected
NAMES_SHOWN = 3  # names in one phrase before "and N more" (actors, holders, classes)
HOLDERS_QUOTED = 4  # holders of a resource quoted with their amounts
HOLDER_NODE_ID_CHARS = 8  # the node id's head in such a quote (the link's words name the node in full)
NODE_LABEL_ID_CHARS = 12  # a node id's head in a node's label (its IP follows)
JOB_LABEL_ENTRYPOINT_CHARS = 60  # the entrypoint in a job's label
TIMED_OUT_WORK_NAMED = 2  # the work a driver stopped waiting for, named when it timed out

# -- job_topology -------------------------------------------------------------------------------------------

TOPOLOGY_ACTORS = 500  # actors in the structured answer (counts stay exact)
TOPOLOGY_ACTOR_ROWS = 5000  # actors of the job read from the State API (and the GCS) per call
TOPOLOGY_GROUPS = 100  # placement groups in the structured answer
TOPOLOGY_GROUP_ROWS = 500  # placement groups of the job read per call
TOPOLOGY_BUNDLES_PER_GROUP = 1000
TOPOLOGY_NODES = 200
TOPOLOGY_GAPS = 100  # gaps in the structured answer
TOPOLOGY_TEXT_GAPS = 15  # gaps in the text answer
TOPOLOGY_TEXT_BYTES = 12 * 1024  # the text tree is cut here (a training job of a few nodes fits whole)
TOPOLOGY_IDLE_GPU_NODES = 5  # GPU nodes without an actor of the job, named one by one
TOPOLOGY_MEMBER_QUERIES = 20  # groups whose members from other jobs are looked up (one request each)
TOPOLOGY_IDS_PER_REQUEST = 100  # actor ids per /logical/actors request
DEATH_CHARS = 200  # a dead rank's cause in a gap
SPAWNED_ACTORS_SHOWN = 5  # actors a Serve replica spawned, listed under it
SERVE_APPS_NAMED = 10  # Serve applications named when they are not attributed to the job

# -- Ray Train (list_train_runs, get_train_run) -------------------------------------------------------------

TRAIN_RUNS = Bound(default=20, low=0, high=200)
TRAIN_ERROR_CHARS = 1500  # one group of ranks' error snippet
TRAIN_ERROR_LINES = 12  # of which the text answer shows the last lines
TRAIN_METRICS_SHOWN = 12  # metrics of the latest checkpoint
TRAIN_SNAPSHOT_BYTES = 1_048_576  # the checkpoint manager snapshot read from local storage, at most

# -- the live API reference ----------------------------------------------------------------------------------

API_DOC_CHARS = 12_000
API_MEMBERS_SHOWN = 60
API_NAME_CHARS = 300  # a longer ray-docs://api/ name is refused
API_LOOKUP_WORKERS = 2  # docs reads parsed at once (worker processes); the rest wait, holding nothing
API_LOOKUP_TIMEOUT_S = 30.0
API_ANSWERS_CACHED = 512
API_SOURCE_BYTES = 4 * 1024 * 1024  # a larger source file of Ray is not read

# -- tail_logs grep ----------------------------------------------------------------------------------------------

MAX_GREP_CHARS = 1000  # a longer pattern is refused
GREP_LONG_LINE_BYTES = 1_048_576  # a line longer than this is matched in pieces of this size and shown cut
GREP_THREADS = 4  # greps scanning at once (worker threads; RE2 releases the GIL)

# -- confirmations and uploads -------------------------------------------------------------------------------

# A destructive tool's confirm token expires after this (Settings.confirm_token_ttl_s).
CONFIRM_TOKEN_TTL_S = 300.0
REPLICA_KEY_BYTES = 32  # the least a replica key file may hold
# Files and directories walked in one local upload (working_dir, py_modules) before refusing.
MAX_UPLOAD_ENTRIES = 100_000

# -- stacks and CPU profiles (stack_traces, cpu_profile, the stall finding of diagnose_job) -----------------

STACK_PROCESSES = Bound(default=16, low=1, high=64)  # processes sampled by stack_traces
# a stack_traces answer, text and structured content each: the edge fits the whole as sent (the two together,
# escaped) within STACK_WHOLE_SHARE times max_bytes and the result's envelope (12,300 bytes at the default)
STACK_BYTES = Bound(default=6_000, low=1_000, high=64_000)
STACK_WHOLE_SHARE = 2
STACK_FRAMES = Bound(default=8, low=1, high=40)  # project frames shown per stack
STACK_PIDS_SHOWN = 8  # pids named per group of identical stacks
PROFILE_S = Bound(default=5, low=1, high=30)  # seconds cpu_profile samples
PROFILE_FUNCTIONS = Bound(default=15, low=1, high=50)  # hottest functions listed
STACK_VERDICT_CHARS = 300  # the verdict line of stack_traces: where the processes are
STACK_VERDICT_GROUPS = 3  # groups of stacks named in it, the likeliest culprit first
STACK_FAILURES_KEPT = 3  # processes that could not be sampled, named when the answer is over its budget
STACK_FRAMES_KEPT = 2  # frames the first stack keeps when it alone is over the budget
ACTOR_FIELD_CHARS = 800  # an actor's call site in get_actor

# -- memory and GPU profiles (memory_profile, gpu_profile) ---------------------------------------------------

# seconds memray stays attached (Ray's route accepts 1..RAY_DASHBOARD_PROFILING_MAX_DURATION_S, 60 by default)
MEMORY_PROFILE_S = Bound(default=5, low=1, high=30)
MEMORY_ALLOCATORS = Bound(default=10, low=1, high=40)  # allocating lines listed, by own size
MEMORY_LEAKS_SHOWN = 5  # project lines named as leak candidates
MEMORY_STACK_FRAMES = 6  # frames of the largest allocation's stack
MEMORY_SLACK_S = 60.0  # on top of a memory profile's duration: memray attaches (gdb) and renders its report
GPU_PROFILE_STEPS = Bound(default=4, low=1, high=20)  # optimizer steps a Torch GPU trace covers
GPU_PROFILE_TIMEOUT_S = 300.0  # waiting for those steps: a training step may take minutes

# -- the object store (summarize_objects) and cluster events (list_events) ----------------------------------
OBJECT_GROUPS = Bound(default=15, low=1, high=200)  # holders (call site x owner) listed, largest first
STORE_NODES_SHOWN = 20  # nodes whose store use is listed, fullest first
STORE_NODES_NAMED = 2  # nodes under pressure named in the verdict
STORE_ONE_HOLDER_SHARE = (
    0.5  # a full store's holder that holds at least this share of it is named as its cause
)
STORE_HOLDERS_QUOTED = 3  # largest holders quoted in a diagnosis when a store is near full or spilling
CALL_SITE_CHARS = 200  # of a call site (Ray records a whole line of user code)
EVENTS_SHOWN = Bound(default=20, low=1, high=200)  # distinct event messages listed, newest first
EVENT_MESSAGE_CHARS = 300
AUTOSCALER_DECISIONS = 8  # distinct autoscaler events in cluster_status
LOG_FILES_SHOWN = 50  # files listed by tail_logs when filename is a pattern

# -- Ray Data (get_job's datasets, diagnose_job's stalled pipeline) -----------------------------------------
DATASETS_READ = 20  # a job's datasets kept from the dashboard's answer, newest first
DATASETS_SHOWN = 5  # datasets shown by get_job, newest first
DATA_OPERATORS_SHOWN = 30  # operators of one dataset, in pipeline order
DATA_LOG_LINES = 200  # the driver log's tail read by get_job for Ray Data's last progress report
DATA_LOG_BYTES = 48_000

# -- Kubernetes (KubeRay: kuberay_status, kuberay_logs) ----------------------------------------------------

KUBE_PODS_SHOWN = 12  # pods of one RayCluster listed, those with a problem first
KUBE_DEPLOYMENT_MESSAGE_CHARS = 240  # a failing Serve deployment's own message quoted in a RayService finding
KUBE_EVENTS_SHOWN = 12  # deduplicated events listed, warnings first
KUBE_LOG_LINES = Bound(default=80, low=1, high=2000)  # a pod container's log tail
KUBE_LOG_BYTES = 16_384  # asked of the API server at most (limitBytes)
# Reads of one kuberay_logs call: a reply cut at limitBytes lost the newest lines, so fewer lines are asked again
KUBE_LOG_READS = 3
KUBE_SUBMITTER_LOG_LINES = 5  # the end of a RayJob's failed submitter's log, quoted in kuberay_status
KUBE_SUBMITTER_LOG_BYTES = 2_048  # asked of the API server for it at most (limitBytes)
KUBE_UPGRADE_STUCK_S = 600.0  # a RayService upgrade pending this long is reported as stuck

# -- the KubeRay fleet, its changes and lint (kuberay_fleet, kuberay_apply, kuberay_delete, kuberay_lint) ----

FLEET_ROWS = Bound(default=30, low=1, high=200)  # objects listed per page (Kubernetes' limit, then continue)
FLEET_PODS_READ = 2_000  # Ray pods read for one page's rows (ready workers, GPUs asked)
FLEET_RAY_CHECKS = 6  # clusters of a page whose dashboards are asked for cluster_health's verdict
FLEET_RAY_BUDGET_S = Bound(default=4.0, low=0.0, high=60.0)  # how long the fleet waits for them, all together
FLEET_FINDING_CHARS = 160  # a row's first finding, cut to one line
FLEET_CONTEXTS = 8  # kube contexts one call lists at most
HISTORY_RECORDS_SHOWN = 20  # clusters a History Server keeps, listed with the fleet
KUBE_LINT_NEIGHBOURS = 200  # the namespace's KubeRay objects read to find colliding head services
KUBE_DIFF_SHOWN = 25  # field changes of a plan shown in its text (the structured answer has them all)
KUBE_DIFF_VALUE_CHARS = 120  # a value in a field change, cut
KUBE_LINT_SHOWN = 10  # lint findings shown in a plan's text
# -- Prometheus (sources/prometheus.py, get_metrics; toolset "metrics") ------------------------------------

PROMETHEUS_TIMEOUT_S = 8.0  # one request to Prometheus (Prometheus is also told to stop evaluating by then)
PROMETHEUS_PROBE_TIMEOUT_S = (
    2.0  # a candidate Prometheus (the one the dashboard reports) must answer this fast
)
NODE_METRICS_TIMEOUT_S = 4.0  # one node's metrics endpoint, read when no Prometheus is known
NODE_METRICS_BYTES = 8 * 1_048_576  # a node's metrics page read at most (a busy node's is ~1 MB)
NODE_METRICS_ENDPOINTS = 64  # nodes' metrics endpoints read at most per call without a Prometheus
EMBEDDED_SCRAPE_INTERVAL_S = 5.0  # the embedded cluster's Prometheus (Ray's own config says 10 s)
PROMQL_GET_CHARS = 2_000  # a longer query is sent as a POST form (a URL that long may be refused on the way)
METRIC_SERIES = Bound(default=12, low=1, high=100)  # series summarized in one get_metrics answer (all panels)
SERIES_READ = (
    1_000  # series of one panel read from Prometheus at most (topk); the answer says how many matched
)
RANGE_POINTS = 120  # points per series asked of Prometheus over the window (the step follows from it)
SPARK_CHARS = 24  # characters of one series' text sparkline
SERIES_NAME_CHARS = 120  # a series' name made of its labels
CHANGE_MIN_EXPLAINED = 0.6  # a step (or a ramp) must explain this share of a series' variance to be named
CHANGE_MIN_SHIFT = 0.05  # ... and a step move by this share of the series' largest value
PROMETHEUS_RESPONSE_BYTES = 32 * 1_048_576  # a larger Prometheus answer is refused: narrow the query
MAX_WINDOW_S = 31 * 86_400  # the longest window one call may ask about
PROMQL_CHARS = 4_000  # a longer raw PromQL query is refused
MIN_RATE_WINDOW_S = 60  # rate() over at least this (Ray scrapes every 10 s by default: six samples)
CHART_SERIES = 6  # series drawn per panel in get_metrics' PNG chart
CHART_INCHES = (6.0, 3.2)  # the chart's width and (for two panels) height
CHART_DPI = 80  # 480 px wide: a small image in a client's context
CHART_LABEL_CHARS = 40  # a series' name in the chart's legend
CHART_TITLE_CHARS = 100  # the chart's title (the verdict's start)
WHY_CHARS = 200  # why there is no history, in a verdict (the whole reason is in a note)

# How often unused HTTP sessions are swept when no request arrives to sweep them (a quarter of the grace,
# within these bounds): often enough to free a slot soon after its grace, rarely enough to cost nothing.
SESSION_SWEEP_MIN_S = 0.25
SESSION_SWEEP_MAX_S = 5.0

# -- Trends in the diagnosis (diagnosis/history.py, diagnosis/rules/trends.py) -------------------------------
# Ray's memory monitor kills workers when a node's memory use reaches this fraction: the raylet setting
# `memory_usage_threshold` (env RAY_memory_usage_threshold), default 0.95 (Settings.memory_usage_threshold).
MEMORY_USAGE_THRESHOLD = 0.95
TRENDS_TIMEOUT_S = 6.0  # every trend read of one diagnosis together: a slower Prometheus leaves them unknown
TREND_WINDOW_S = 1_800  # how far back diagnose_job (from the job's start, if later) and cluster_health look
TREND_MIN_SPAN_S = 60  # a series with less history than this has no trend to read
TREND_SERIES = 8  # series read per trend question (the most significant)
LEAK_MIN_BYTES_PER_S = 64 * 1024  # memory growing at least this fast (3.75 MiB/min) ...
LEAK_MIN_GROWTH_BYTES = 64 * 1_048_576  # ... by at least this much over the window, steadily, is a leak
STORE_RISING_MIN_PCT = 10.0  # an object store whose use rose by this many points, steadily, is filling
THROUGHPUT_MIN_PER_MIN = 6.0  # tasks finished per minute before a collapse (less is too little to judge)
THROUGHPUT_COLLAPSE = 0.25  # finished per minute after the step, at most this share of before: a collapse
LATENCY_RISE = 2.0  # a Serve p99 that stepped up by this factor ...
LATENCY_RISE_MIN_MS = 50.0  # ... and by at least this many ms
IDLE_SHARE = 0.1  # a job's workers using under this share of the CPUs it holds, on average, are idle
EVENT_NEAR_S = 600  # a deploy or event this close to a change is named beside it
COMPARE_FUNCTIONS = 8  # functions set side by side in compare_jobs' answer (the largest change first)
COMPARE_DIFFERENCES = 10  # differences listed in compare_jobs' answer (the heaviest first; the rest counted)


# Bounds of the answers' own joins (answers/), named here like every other bound.
INPUT_ERROR_CHARS = (
    200  # a parser's error about the caller's input (a manifest's YAML), quoted in the refusal
)
OTHER_PODS_NAMED = (
    5  # pods that carry a RayCluster's label without its owner reference, named (the rest counted)
)
JOB_LAST_LINE_READ_BYTES = 8192  # the tail of a job's driver log read for its last line
JOB_LAST_LINE_LINES = 3  # lines of it asked for: the last non-empty one is kept
FOLLOW_LINE_START_BYTES = 4096  # the start of a partial line a log follow carries to the next chunk
METRIC_NAMES_SUGGESTED = 8  # Ray metric names offered for an unknown one when none is close
PROM_SESSIONS_NAMED = 5  # Ray sessions named when the one asked for is not in Prometheus
FAILED_TARGETS_NAMED = 3  # metrics endpoints named with why they failed (the rest counted)
DEAD_REPLICAS_READ = 100  # a deployment's dead replicas read to find the newest one's log
PID_WORKERS_READ = 10  # workers read for one node and pid (one is alive; a few may be recorded)
STACK_FAILURES_QUOTED = 3  # why a stack could not be read, per process, quoted (the rest counted)
TRAIN_RUN_NAMES_SHOWN = 10  # run names offered when the one asked for is not found
