"""Every bound on what ray-mcp sends back to an agent, named once.

Tool parameters (their ``le``/``ge`` and the numbers in their descriptions), the adapter's requests and the
shaping code all read these; changing an output size means changing this file. An agent's context window is
the scarce resource: every answer is bounded, and says what it left out. A size the agent picks per call is a
``Bound``: the parameter's default and the range its schema accepts, together.
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
RESPONSE_BUDGET_BYTES = (
    8 * 1024
)  # a whole answer at default limits stays under this: text + structured content
LIST_BUDGET_BYTES = (
    3_500  # the items of a list answer, as JSON (their text is about as long; then totals, hints)
)
STATE_API_MAX_ROWS = 10_000  # Ray's State API returns at most this many rows per call
MAX_TASK_GROUPS = 40  # task names shown by summarize_tasks
MAX_ERROR_TYPES_SAMPLED = 10  # error types of failed tasks that get a sample task
BUNDLES_SHOWN = 8  # bundles of one placement group in the text answer
LIST_FIELD_CHARS = 200  # one-line fields of a list row (entrypoint, first error line)
FIELD_CHARS = 500  # a field shown in full elsewhere (metadata, runtime_env, a death message)
LINE_CHARS = 300  # one line quoted from Ray (a message, a replica's log line, a cause in a list)

# -- cluster_status ------------------------------------------------------------------------------------------

STATUS_NODES = Bound(default=20, low=1, high=1000)  # nodes listed one by one (all are counted)
FAILED_NODES_SHOWN = 5
HOST_USAGE_MAX_NODES = (
    256  # host CPU/memory/GPU use (/nodes?view=summary, ~1 KB per worker) read up to this size
)

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
ENTRYPOINT_IN_QUESTION_CHARS = 80  # the entrypoint quoted when asking to delete a job

# -- logs ----------------------------------------------------------------------------------------------------

LOG_LINES = Bound(default=100, low=1, high=2000)
# A tail is the first follow-up of a diagnosis: by default the whole answer (the lines come twice, in the text
# and the structured content) stays under 8 KB (16 KB of log text once made a 17 KB answer). max_bytes asks for
# more.
LOG_BYTES = Bound(default=3_500, low=256, high=1_048_576)
# The whole answer as a client receives it (the lines twice, each as an escaped JSON string: a quote or a
# backslash takes 2 bytes, a control character 5-7), at most this share of max_bytes (8,000 at the default).
LOG_WHOLE_SHARE = 16 / 7
MAX_GREP_CONTEXT = 20  # lines around each grep match
MAX_FOLLOW_S = 120.0
SCAN_MB = Bound(default=256, low=1, high=8192)  # grep stops scanning after this many MB
PROGRESS_CHARS = 1000  # the log lines of one progress notification while following a log
FILES_LISTED = 25  # files named when a log file is not found on a node

# -- Serve ---------------------------------------------------------------------------------------------------

SERVE_LOG_LINES = Bound(default=15, low=0, high=100)  # log lines of each failing deployment's replica
MAX_REPLICAS_SHOWN = 10  # replicas of one deployment
SERVE_ERROR_CHARS = 1500  # the error of a failing application or deployment
FAILING_DEPLOYMENTS_WITH_LOGS = 3

# -- diagnose_job and cluster_health -------------------------------------------------------------------------

# the text answer (its findings come again in the structured content)
DIAGNOSIS_BYTES = Bound(default=6_000, low=1_000, high=32_000)
# the text and the structured content together: at most this share of the text budget (8,000 at the default)
DIAGNOSIS_WHOLE_SHARE = 4 / 3
DRIVER_LOG_LINES = 400  # the driver log's tail read for a diagnosis
DRIVER_LOG_BYTES = 96_000
ACTOR_LOG_LINES = 60  # grep output of a crashed actor's log
ACTOR_LOG_BYTES = 8_000
EVIDENCE_ITEMS = 12  # evidence lines of one finding
NEXT_STEPS = 3  # next steps (and references) of one finding
NOTES_SHOWN = 4
EVIDENCE_LINE_CHARS = 240  # one quoted log or traceback line
CAUSE_CHARS = 200  # a cause named in a finding's title or evidence
SHORT_CAUSE_CHARS = 160  # a cause in a grouped line (N actors died of ...)
JOB_CAUSE_HEAD_CHARS = 120  # the head of a failed job's message, when it has no traceback
TRACEBACK_LINES = 24  # lines of the excerpt of a traceback
ERROR_LINES = 6  # error lines picked out of a long message (pip's output, ...)

# -- job_topology -------------------------------------------------------------------------------------------

TOPOLOGY_ACTORS = 500  # actors in the structured answer (~600 bytes each; counts stay exact)
TOPOLOGY_ACTOR_ROWS = 5000  # actors of the job read from the State API (and the GCS) per call
TOPOLOGY_GROUPS = 100  # placement groups in the structured answer
TOPOLOGY_GROUP_ROWS = 500  # placement groups of the job read per call
TOPOLOGY_BUNDLES_PER_GROUP = 1000
TOPOLOGY_NODES = 200
TOPOLOGY_GAPS = 100  # gaps in the structured answer
TOPOLOGY_TEXT_GAPS = 15  # gaps in the text answer
TOPOLOGY_TEXT_BYTES = 12 * 1024  # the text tree is cut here (64 ranks on 8 nodes take ~3.6 KB)
TOPOLOGY_IDLE_GPU_NODES = 5  # GPU nodes without an actor of the job, named one by one
TOPOLOGY_MEMBER_QUERIES = 20  # groups whose members from other jobs are looked up (one request each)
TOPOLOGY_IDS_PER_REQUEST = 100  # actor ids per /logical/actors request
DEATH_CHARS = 200  # a dead rank's cause in a gap

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

# -- tail_logs grep ----------------------------------------------------------------------------------------------

MAX_GREP_CHARS = 1000  # a longer pattern is refused
GREP_LONG_LINE_BYTES = 1_048_576  # a line longer than this is matched in pieces of this size and shown cut
GREP_THREADS = 4  # greps scanning at once (worker threads; RE2 releases the GIL)

# -- confirmations and uploads -------------------------------------------------------------------------------

CONFIRM_TOKEN_TTL_S = (
    300.0  # a destructive tool's confirm token expires after this (Settings.confirm_token_ttl_s)
)
MAX_UPLOAD_ENTRIES = (
    100_000  # files and directories walked in one local upload (working_dir...) before refusing
)

# -- stacks and CPU profiles (stack_traces, cpu_profile, the stall finding of diagnose_job) -----------------

STACK_PROCESSES = Bound(default=16, low=1, high=64)  # processes sampled by stack_traces
# a stack_traces answer, text and structured content each
STACK_BYTES = Bound(default=6_000, low=1_000, high=64_000)
STACK_FRAMES = Bound(default=8, low=1, high=40)  # project frames shown per stack
STACK_PIDS_SHOWN = 8  # pids named per group of identical stacks
PROFILE_S = Bound(default=5, low=1, high=30)  # seconds cpu_profile samples
PROFILE_FUNCTIONS = Bound(default=15, low=1, high=50)  # hottest functions listed
HANG_STACK_PROCESSES = 8  # processes whose stacks diagnose_job reads for a stalled job
HANG_STACK_BYTES = 2_500
HANG_TASK_ROWS = 1_000  # task rows read per state to judge a job's progress
ACTOR_FIELD_CHARS = 800  # an actor's call site in get_actor
