"""The settings table: one row per setting, its default written once.

A row names the environment variable, the parser that turns the variable into
a value (and says what to fix when it cannot), the default (as the variable
would spell it, so the documentation shows what a user would set), the help
text, and where the value lands in `Settings` (`group.field`). `Settings`,
`Settings.from_env` and docs/settings.md are all built from `ROWS`; the
variables the bot reads that are not settings (the Action's `GITHUB_*`, the
docker client's, the sandbox's own) are listed in `OTHER_VARIABLES`, so the
documentation names every variable the code reads.

Hand-written rather than pydantic-settings: every malformed value must be a
one-line `ConfigError` naming the variable and the fix, worded per setting,
and the table must stay importable without the sandbox package.
"""

from __future__ import annotations

from bot.config.parsers import (  # noqa: F401 (re-exported: the table is where the settings are looked up)
    CREDENTIAL_FILE_VARS, DEFAULT_MODEL, MIN_THINKING_BUDGET, PRICE_KEYS, PROVIDERS, RemoteMcp, Row, SANDBOX_MODES,
    choice, cidrs, count, credential_files, data_dir, database_url, fixed, line, mcp_servers, path, paths, positive,
    prices, private_key, text, thinking, thinking_value, token, url,
)

MAX_WORKERS = 256  # jobs one process runs at once: each holds a sandbox, so more is a typo, not a machine


ROWS: tuple[Row, ...] = (
    # model
    Row("model", "DECODE_MODEL", "model.name", DEFAULT_MODEL, line,
        "the model id; `scripted:FILE` replays a session JSON or a `transcript.jsonl` instead"),
    Row("anthropic_api_key", "ANTHROPIC_API_KEY", "model.api_key", None, token,
        "anthropic: the Anthropic API's key (the SDK's own name)", secret=True),
    Row("anthropic_base_url", "ANTHROPIC_BASE_URL", "model.base_url", None, url,
        "anthropic: the API's base URL: any Anthropic-compatible endpoint"),
    Row("provider", "DECODE_PROVIDER", "model.provider", "anthropic", choice(PROVIDERS),
        "who serves the model: `anthropic` (the Anthropic API), `bedrock` (Amazon Bedrock) or `vertex` (Google "
        "Vertex AI), each through the SDK's own client and its own variables below (docs/providers.md)"),
    Row("aws_region", "AWS_REGION", "model.aws_region", None, text,
        "bedrock: the AWS region; unset: AWS_DEFAULT_REGION, else the AWS profile's region"),
    Row("aws_access_key_id", "AWS_ACCESS_KEY_ID", "model.aws_access_key_id", None, text,
        "bedrock: the AWS access key id, with AWS_SECRET_ACCESS_KEY; unset: AWS_PROFILE or boto3's own chain "
        "(shared credentials file, instance role)"),
    Row("aws_secret_access_key", "AWS_SECRET_ACCESS_KEY", "model.aws_secret_access_key", None, text,
        "bedrock: the AWS secret access key", secret=True),
    Row("aws_session_token", "AWS_SESSION_TOKEN", "model.aws_session_token", None, text,
        "bedrock: the session token of temporary AWS credentials", secret=True),
    Row("aws_profile", "AWS_PROFILE", "model.aws_profile", None, text,
        "bedrock: the AWS profile (in ~/.aws/config and ~/.aws/credentials) to take credentials and region from"),
    Row("aws_bearer_token_bedrock", "AWS_BEARER_TOKEN_BEDROCK", "model.aws_bearer_token", None, text,
        "bedrock: a Bedrock API key, instead of AWS credentials", secret=True),
    Row("bedrock_base_url", "ANTHROPIC_BEDROCK_BASE_URL", "model.bedrock_base_url", None, url,
        "bedrock: the runtime endpoint; unset: `https://bedrock-runtime.REGION.amazonaws.com`"),
    Row("vertex_region", "CLOUD_ML_REGION", "model.vertex_region", None, text,
        "vertex: the Vertex AI region (`us-east5`, `europe-west1`, `global`, ...); required"),
    Row("vertex_project_id", "ANTHROPIC_VERTEX_PROJECT_ID", "model.vertex_project_id", None, text,
        "vertex: the Google Cloud project; unset: the service account key file's project"),
    Row("vertex_base_url", "ANTHROPIC_VERTEX_BASE_URL", "model.vertex_base_url", None, url,
        "vertex: the Vertex AI endpoint; unset: `https://REGION-aiplatform.googleapis.com/v1`"),
    Row("google_credentials", "GOOGLE_APPLICATION_CREDENTIALS", "model.google_credentials", None, path,
        "vertex: a service account key file (JSON); unset: Application Default Credentials (gcloud, the "
        "metadata server). Hidden from every sandbox"),
    Row("prices", "DECODE_PRICES", "model.prices", None, prices,
        'JSON `{"model-id": {"input": 3, "output": 15, "cache_write": 3.75, "cache_read": 0.3}}`, USD per '
        'million tokens; unset: the built-in prices'),
    Row("thinking", "DECODE_THINKING", "model.thinking", "on", thinking,
        "extended thinking: `on` (where the Models API says the model supports it: adaptive, else a 10,000-token "
        "budget), `off`, or a budget in tokens (at least 1024); a repository's decode.yml `thinking` overrides it "
        "(docs/model.md)"),
    # GitHub
    Row("github_token", "GITHUB_TOKEN", "github.token", None, token,
        "token mode (the Action, the CLI): clone, push, pull requests and comments", secret=True),
    Row("github_app_id", "GITHUB_APP_ID", "github.app_id", None, text, "GitHub App mode: the App's id"),
    Row("github_app_private_key", "GITHUB_APP_PRIVATE_KEY", "github.app_private_key", None, private_key,
        "GitHub App mode: the App's PEM private key text", secret=True),
    Row("github_app_private_key_path", "GITHUB_APP_PRIVATE_KEY_PATH", "github.app_private_key_path", None, path,
        "GitHub App mode: a file holding the private key (read when GITHUB_APP_PRIVATE_KEY is unset; "
        "hidden from every sandbox)"),
    Row("github_webhook_secret", "GITHUB_WEBHOOK_SECRET", "github.webhook_secret", None, line,
        "the App's webhook secret, required by `decode serve`: every delivery's signature is checked with it",
        secret=True),
    Row("github_api_url", "GITHUB_API_URL", "github.api_url", "https://api.github.com", url,
        "the REST API's base (GitHub Enterprise: `https://HOST/api/v3`)"),
    Row("trigger_label", "DECODE_TRIGGER_LABEL", "github.trigger_label", "agent", text,
        "the issue label that starts a run"),
    Row("command", "DECODE_COMMAND", "github.command", "/decode", text,
        "the comment command that starts a run"),
    Row("max_bot_runs", "DECODE_MAX_BOT_RUNS", "github.max_bot_runs", 3,
        count("DECODE_MAX_BOT_RUNS={raw!r} is not valid: set it to how many runs bots may start on one issue or "
              "pull request (default {default}; 0: none)"),
        "how many runs the bots `allowed_bots` lists may start on one issue or pull request; past it, one reply "
        "says so and their commands and labels there are ignored (a writer's still start runs). Bots' commands "
        "on decode-bot's own pull requests (`decode/` branches) are always ignored"),
    Row("github_client_id", "GITHUB_CLIENT_ID", "github.client_id", None, text,
        "the App's OAuth client id, for the dashboard's GitHub sign-in"),
    Row("github_client_secret", "GITHUB_CLIENT_SECRET", "github.client_secret", None, text,
        "the App's OAuth client secret", secret=True),
    Row("github_writes_per_minute", "DECODE_GITHUB_WRITES_PER_MINUTE", "github.writes_per_minute", 80,
        count("DECODE_GITHUB_WRITES_PER_MINUTE={raw!r} is not valid: set it to a whole number of writes "
              "(default {default}; 0: no pacing)"),
        "content-creating requests per account and minute (and 6.25 times that an hour), counted across every "
        "process on the job store (the Action and `decode run`: per process): GitHub's secondary limit, 80 and "
        "500 (docs/scale.md); a GitHub Enterprise Server whose admin raised it may raise this; 0: no pacing"),
    # sandbox
    Row("sandbox_mode", "SANDBOX_MODE", "sandbox.mode", "docker", choice(SANDBOX_MODES),
        f"where the agent's commands run: {', '.join(SANDBOX_MODES)}"),
    Row("sandbox_image", "DECODE_SANDBOX_IMAGE", "sandbox.image", "decode-sandbox:latest", text,
        "the image of `docker` and `modal` sandboxes (a registry image for modal); it needs `python3` "
        "(git is added on modal)"),
    Row("hide_paths", "DECODE_HIDE_PATHS", "sandbox.hide_paths", (), paths,
        "more host paths no sandbox may see (`:`-separated, absolute): the host's other secret files, such as a "
        "credentials directory; hidden like the data dir (bwrap masks them; docker and modal never show the host)"),
    Row("sandbox_hide", None, "sandbox.hide", (), fixed,
        "more host paths no sandbox may see, besides the data dir, DECODE_HIDE_PATHS and the App key file (the "
        "Action: the checkout, RUNNER_TEMP, HOME)"),
    Row("credential_files", None, "sandbox.credential_files", (), credential_files,
        "the credentials files a provider's variables name (" + ", ".join(CREDENTIAL_FILE_VARS) + "): hidden "
        "from every sandbox like the data dir, and their contents redacted like a secret value"),
    Row("sandbox_path", None, "sandbox.path", (), fixed,
        "host PATH entries the sandbox puts first when it can see them (bwrap; the Action: the step's PATH)"),
    Row("cgroup_parent", "DECODE_CGROUP_PARENT", "sandbox.cgroup_parent", None, path,
        "`bwrap` as non-root: a cgroup v2 directory delegated to the bot's user, where each sandbox gets its "
        "cgroup (without it, or root, bwrap refuses to start)"),
    Row("max_disk_mb", "DECODE_MAX_DISK_MB", "sandbox.max_disk_mb", 10240, positive(int),
        "what one run's agent may write (workspace and temp), in MB (local, bwrap, docker); past it the agent "
        "stops and its work so far is committed as incomplete (exit 3)"),
    Row("max_memory_mb", "DECODE_MAX_MEMORY_MB", "sandbox.max_memory_mb", 4096, positive(int),
        "the memory one sandbox may use, in MB (bwrap, docker, modal); past it the kernel kills a process and, "
        "on bwrap and docker, the agent stops and its work so far is committed as incomplete (exit 3)"),
    Row("max_restarts", "DECODE_MAX_RESTARTS", "sandbox.max_restarts", 2,
        count("DECODE_MAX_RESTARTS={raw!r} is not valid: set it to how many times a run may restart a sandbox "
              "that died (default {default}; 0: never)"),
        "how many times one run starts a new sandbox on its kept workspace after its sandbox died (killed "
        "from outside or out of memory); past it the work so far is committed as incomplete"),
    Row("max_file_mb", "DECODE_MAX_FILE_MB", "sandbox.max_file_mb", 50, positive(int),
        "the largest file carried back from the sandbox, in MB"),
    Row("setup_cache_mb", "DECODE_SETUP_CACHE_MB", "sandbox.setup_cache_mb", 10240,
        count("DECODE_SETUP_CACHE_MB must be a whole number of megabytes for the setup cache "
              "(default {default}; 0 turns it off), not {raw!r}"),
        "docker, bwrap and modal: the setup cache's total size in MB (`setup_cache_key` in decode.yml); "
        "0 turns it off"),
    Row("allow_cidrs_max", "DECODE_ALLOW_CIDRS_MAX", "sandbox.allow_cidrs_max", (), cidrs,
        "the most a repository's `allow_cidrs` may open: comma-separated CIDRs; a decode.yml range reaching a "
        "non-public address outside them is an error naming this setting, before any work. Unset: public "
        "ranges only. Loopback, the host's own addresses and cloud metadata stay closed whatever it says "
        "(docs/security.md, Egress)"),
    Row("pool_size", "DECODE_POOL_SIZE", "sandbox.pool_size", 0,
        count("DECODE_POOL_SIZE={raw!r} is not valid: set it to a number of warm sandboxes (0 = none)"),
        "`docker` and `modal`: warm sandboxes kept ready per process and image by `decode serve`, "
        "`decode worker` and the Modal app; `decode run` and the Action keep none"),
    Row("mcp_servers", "DECODE_MCP_SERVERS", "mcp.servers", (), mcp_servers,
        "the operator's remote MCP servers (streamable HTTP), JSON: NAME -> {\"url\", \"headers\"}; called by the "
        "harness on the host with those headers (their credentials, redacted everywhere); a repository chooses "
        "among them by name in decode.yml (`NAME: {operator: true}`), never adds one", secret=True),
    Row("mcp_start_s", "DECODE_MCP_START_SECONDS", "mcp.start_s", 60.0, positive(float),
        "how long an MCP server may take to start and list its tools, in seconds; past it the run goes on "
        "without it (or fails, when decode.yml says `required: true`)"),
    Row("mcp_call_s", "DECODE_MCP_CALL_SECONDS", "mcp.call_s", 120.0, positive(float),
        "how long one MCP tool call may take, in seconds; past it the server is stopped and the run goes on "
        "without it"),
    # the job workers
    Row("workers", "DECODE_WORKERS", "pool.workers", 4,
        count("DECODE_WORKERS={raw!r} is not valid: set it to how many jobs a process runs at once "
              "(0: decode serve only takes deliveries, and decode worker processes run them)", MAX_WORKERS),
        f"how many jobs a process runs at once, at most {MAX_WORKERS}; 0: `decode serve` only takes deliveries"),
    Row("shutdown_grace_s", "DECODE_SHUTDOWN_GRACE_SECONDS", "pool.shutdown_grace_s", 30.0, positive(float),
        "on SIGTERM, how long running jobs get to finish before they are interrupted, in seconds"),
    # store
    Row("data_dir", "DECODE_DATA_DIR", "store.data_dir", "~/.decode", data_dir,
        "where the job store, workspaces, transcripts and caches live (hidden from every sandbox)"),
    Row("database_url", "DECODE_DATABASE_URL", "store.database_url", None, database_url,
        "`postgresql://USER:PASSWORD@HOST:PORT/DATABASE`: the job store in PostgreSQL, shared by every "
        "`decode serve` and `decode worker`; unset: the embedded SQLite `DECODE_DATA_DIR/jobs.sqlite3`", secret=True),
    Row("lease_s", "DECODE_LEASE_SECONDS", "store.lease_s", 120.0, positive(float),
        "how long a worker holds a job without renewing its lease before another may take it, in seconds"),
    Row("max_attempts", "DECODE_MAX_ATTEMPTS", "store.max_attempts", 3, positive(int),
        "how many times a job is started before it is given up"),
    Row("max_running_per_installation", "DECODE_MAX_RUNNING_PER_INSTALLATION", "store.max_running_per_installation",
        0, count("DECODE_MAX_RUNNING_PER_INSTALLATION={raw!r} is not valid: set it to how many jobs of one GitHub "
                 "App installation may run at once across every worker (0: no cap)"),
        "how many jobs of one installation (a job no installation delivered: of one repository owner) run at once "
        "across every worker; the rest wait, queued, and say so; 0: no cap"),
    Row("max_running_per_repo", "DECODE_MAX_RUNNING_PER_REPO", "store.max_running_per_repo", 0,
        count("DECODE_MAX_RUNNING_PER_REPO={raw!r} is not valid: set it to how many jobs of one repository may "
              "run at once across every worker (0: no cap)"),
        "how many jobs of one repository run at once across every worker, so one busy repository cannot take "
        "every worker; 0: no cap"),
    Row("keep_days", "DECODE_KEEP_DAYS", "store.keep_days", 30.0, positive(float),
        "days a run's transcripts and record (and an unpublished clone) are kept after its last write, a "
        "transcript link lives after it is made, and an unused repository mirror is kept"),
    Row("mirror_mb", "DECODE_MIRROR_MB", "store.mirror_mb", 10240,
        count("DECODE_MIRROR_MB must be a whole number of megabytes for the repository mirrors "
              "(default {default}; 0 turns them off), not {raw!r}"),
        "the repository mirrors' total size in MB (DECODE_DATA_DIR/mirrors: a run fetches only what is new, "
        "clones from there and takes the checkout the last run kept beside it); the least recently used go "
        "past it; 0 turns them off"),
    # web
    Row("public_url", "DECODE_PUBLIC_URL", "web.public_url", None, url,
        "this server's base URL, for links in comments and check runs"),
    Row("metrics_token", "DECODE_METRICS_TOKEN", "web.metrics_token", None, token,
        "the bearer token /metrics asks for, unless it is bound privately", secret=True),
    Row("health_recheck_s", "DECODE_HEALTH_RECHECK_SECONDS", "web.health_recheck_s", 60.0, positive(float),
        "how often, in seconds, GitHub is asked about the credentials and the model API about the key and "
        "model (while either fails, /healthz is 503 and jobs wait)"),
    # budget
    Row("max_turns", "DECODE_MAX_TURNS", "budget.max_turns", 60, positive(int),
        "the agent's turns per run"),
    Row("max_tokens", "DECODE_MAX_TOKENS", "budget.max_tokens", 5_000_000, positive(int),
        "the tokens per run (input including cache, and output)"),
    Row("max_cost_usd", "DECODE_MAX_COST_USD", "budget.max_cost_usd", 10.0, positive(float),
        "the cost per run, in USD"),
    Row("max_wall_s", "DECODE_TIMEOUT_MINUTES", "budget.max_wall_s", 60.0, positive(float, scale=60),
        "the wall-clock cap of the whole run, setup included, in minutes"),
)

OTHER_VARIABLES: tuple[tuple[str, str], ...] = (
    ("GITHUB_EVENT_NAME", "`decode action`: the event that started the workflow"),
    ("GITHUB_EVENT_PATH", "`decode action`: the event's payload file"),
    ("GITHUB_REPOSITORY", "`decode action`: OWNER/NAME of the repository"),
    ("GITHUB_RUN_ID", "`decode action`: the workflow run, for its link"),
    ("GITHUB_RUN_ATTEMPT", "`decode action`: the run's attempt"),
    ("GITHUB_SERVER_URL", "`decode action`: where the run's link points (default https://github.com)"),
    ("GITHUB_OUTPUT", "`decode action`: the file the step's outputs are written to"),
    ("GITHUB_STEP_SUMMARY", "`decode action`: the file the job summary is written to"),
    ("GITHUB_WORKSPACE", "`decode action`: the checkout, hidden from the sandbox"),
    ("RUNNER_TEMP", "`decode action`: the runner's temp dir, hidden from the sandbox"),
    ("DECODE_PROMPT", "`decode action`: the action's `prompt` input, for `schedule` and `workflow_dispatch`"),
    ("HOME", "the Action hides it from the sandbox; the docker CLI and the setup cache read it"),
    ("PATH", "where the docker CLI and the host tools are found; the Action's sandbox puts its entries first"),
    ("DOCKER_HOST", "the docker sandbox: passed to the docker CLI, as are DOCKER_CONTEXT, DOCKER_CONFIG, "
                    "DOCKER_CERT_PATH, DOCKER_TLS_VERIFY, DOCKER_API_VERSION and XDG_RUNTIME_DIR"),
    ("DOCKER_CONTEXT", "see DOCKER_HOST"),
    ("DOCKER_CONFIG", "see DOCKER_HOST"),
    ("DOCKER_CERT_PATH", "see DOCKER_HOST"),
    ("DOCKER_TLS_VERIFY", "see DOCKER_HOST"),
    ("DOCKER_API_VERSION", "see DOCKER_HOST"),
    ("XDG_RUNTIME_DIR", "see DOCKER_HOST"),
    ("HTTPS_PROXY", "git (clone, fetch, push) on the host: passed to git, as are HTTP_PROXY, NO_PROXY (and the "
                    "lowercase https_proxy, http_proxy, no_proxy), "
                    "SSL_CERT_FILE, SSL_CERT_DIR, GIT_SSL_CAINFO, GIT_SSH_COMMAND, SSH_AUTH_SOCK and TMPDIR"),
    ("HTTP_PROXY", "see HTTPS_PROXY"),
    ("NO_PROXY", "see HTTPS_PROXY"),
    ("SSL_CERT_FILE", "see HTTPS_PROXY"),
    ("SSL_CERT_DIR", "see HTTPS_PROXY"),
    ("GIT_SSL_CAINFO", "see HTTPS_PROXY"),
    ("GIT_SSH_COMMAND", "see HTTPS_PROXY"),
    ("SSH_AUTH_SOCK", "see HTTPS_PROXY"),
    ("TMPDIR", "see HTTPS_PROXY"),
    ("AWS_DEFAULT_REGION", "bedrock: read by the SDK and boto3 when AWS_REGION is unset, as are boto3's "
                           "AWS_CONFIG_FILE and AWS_SHARED_CREDENTIALS_FILE"),
    *((var, "a credentials file: hidden from every sandbox, its contents redacted (the sandbox's "
            "credential_files)") for var in CREDENTIAL_FILE_VARS[1:]),
    ("DECODE_EGRESS_SOCKET", "set by the bot inside the sandbox: where agentd reaches the egress proxy"),
)
