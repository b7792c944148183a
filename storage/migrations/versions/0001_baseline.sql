-- AgentState's schema at 0.1.0: the baseline every later migration builds on (0001_baseline.py
-- runs it). Later changes are migrations of their own, additive with an online path
-- (docs/DEPLOY.md); this file does not change.

CREATE FUNCTION public.agent_notify_item() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
    BEGIN
        PERFORM pg_notify('agent_events', json_build_object(
            't', NEW.tenant_id, 's', NEW.session_id, 'o', NEW.ordinal)::text);
        RETURN NULL;
    END $$;

CREATE FUNCTION public.agent_notify_status() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
    BEGIN
        PERFORM pg_notify('agent_events', json_build_object(
            't', NEW.tenant_id, 's', NEW.id, 'status', NEW.status)::text);
        RETURN NULL;
    END $$;

CREATE FUNCTION public.item_key_hash(tenant text, key text) RETURNS uuid
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$
            SELECT encode(substr(sha256(convert_to(
                length(tenant)::text || ':' || tenant || key, 'UTF8')), 1, 16), 'hex')::uuid
        $$;

CREATE TABLE public.admissions (
    tenant_id text NOT NULL,
    idempotency_key character varying(512) NOT NULL,
    budget_session_id uuid NOT NULL,
    session_id uuid NOT NULL,
    kind character varying(16) NOT NULL,
    reserved_tokens bigint DEFAULT '0'::bigint NOT NULL,
    reserved_cost_usd numeric(20,9),
    open boolean DEFAULT false NOT NULL,
    renewed_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT ck_admissions_kind CHECK (((kind)::text = ANY ((ARRAY['model'::character varying, 'tool'::character varying, 'sub_agent'::character varying])::text[]))),
    CONSTRAINT ck_admissions_reserved CHECK ((reserved_tokens >= 0))
);

CREATE TABLE public.agent_artifact_refs (
    tenant_id text NOT NULL,
    artifact_id uuid NOT NULL,
    owner_type text NOT NULL,
    owner_id text NOT NULL,
    required_for_resume boolean DEFAULT false NOT NULL,
    expires_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT ck_refs_owner_type CHECK ((owner_type = ANY (ARRAY['checkpoint'::text, 'trajectory'::text, 'business_output'::text, 'workflow_history'::text])))
);

CREATE TABLE public.agent_artifacts (
    artifact_id uuid NOT NULL,
    tenant_id text NOT NULL,
    sha256 text NOT NULL,
    uri text,
    content_type text NOT NULL,
    size_bytes bigint NOT NULL,
    schema_version integer NOT NULL,
    status text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    unreachable_since timestamp with time zone,
    CONSTRAINT ck_artifacts_status CHECK ((status = ANY (ARRAY['active'::text, 'unreachable'::text])))
);

CREATE TABLE public.api_keys (
    key_id text NOT NULL,
    tenant_id text NOT NULL,
    user_id text NOT NULL,
    name text DEFAULT ''::text NOT NULL,
    scopes jsonb NOT NULL,
    secret_sha256 text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone,
    revoked_at timestamp with time zone,
    device_id text
);

CREATE TABLE public.compactions (
    id uuid NOT NULL,
    tenant_id text NOT NULL,
    session_id uuid NOT NULL,
    version integer NOT NULL,
    previous_compaction_id uuid,
    covers_through_ordinal bigint NOT NULL,
    summary text NOT NULL,
    summary_tokens integer NOT NULL,
    model text NOT NULL,
    idempotency_key character varying(512) NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL
);

CREATE TABLE public.context_blobs (
    tenant_id text NOT NULL,
    sha256 text NOT NULL,
    kind text NOT NULL,
    body text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT ck_blobs_kind CHECK ((kind = ANY (ARRAY['system_prompt'::text, 'tool_schemas'::text])))
);

CREATE TABLE public.context_configs (
    id uuid NOT NULL,
    tenant_id text NOT NULL,
    sha256 text NOT NULL,
    provider text NOT NULL,
    model text NOT NULL,
    system_prompt_sha256 text NOT NULL,
    tool_schemas_sha256 text NOT NULL,
    budget jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    agent jsonb DEFAULT '{}'::jsonb NOT NULL
);

CREATE TABLE public.decision_requests (
    tenant_id text NOT NULL,
    id uuid NOT NULL,
    session_id uuid NOT NULL,
    tool_call_id text,
    data jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL
);

CREATE TABLE public.device_calls (
    id uuid NOT NULL,
    tenant_id text NOT NULL,
    device_id text NOT NULL,
    idempotency_key character varying(512) NOT NULL,
    session_id uuid NOT NULL,
    tool_call_id character varying(128) NOT NULL,
    tool_name character varying(128) NOT NULL,
    step integer NOT NULL,
    rerun integer DEFAULT 0 NOT NULL,
    task_token bytea NOT NULL,
    attempt integer DEFAULT 1 NOT NULL,
    state character varying(16) NOT NULL,
    lease_expires_at timestamp with time zone,
    offers integer DEFAULT 0 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT ck_device_calls_state CHECK (((state)::text = ANY ((ARRAY['pending'::character varying, 'leased'::character varying, 'done'::character varying])::text[])))
);

CREATE TABLE public.devices (
    tenant_id text NOT NULL,
    device_id text NOT NULL,
    tools jsonb NOT NULL,
    registered_at timestamp with time zone DEFAULT now() NOT NULL,
    last_seen_at timestamp with time zone DEFAULT now() NOT NULL,
    tool_specs jsonb
);

CREATE TABLE public.items (
    id uuid NOT NULL,
    tenant_id character varying(128) NOT NULL,
    session_id uuid NOT NULL,
    ordinal bigint NOT NULL,
    kind character varying(32) NOT NULL,
    role character varying(16) NOT NULL,
    text text DEFAULT ''::text NOT NULL,
    tool_call_id character varying(128),
    tool_name character varying(128),
    data jsonb DEFAULT '{}'::jsonb NOT NULL,
    idempotency_key character varying(512) NOT NULL,
    artifact_id uuid,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    turn_id uuid,
    tokens integer DEFAULT 0 NOT NULL,
    CONSTRAINT ck_items_kind CHECK (((kind)::text = ANY ((ARRAY['user_message'::character varying, 'assistant_message'::character varying, 'tool_call'::character varying, 'tool_result'::character varying, 'approval'::character varying, 'error'::character varying])::text[])))
);

CREATE TABLE public.memories (
    id uuid NOT NULL,
    tenant_id text NOT NULL,
    scope_type text NOT NULL,
    scope_id text NOT NULL,
    content text NOT NULL,
    source jsonb NOT NULL,
    version integer DEFAULT 1 NOT NULL,
    created_by text NOT NULL,
    supersedes_id uuid,
    deleted_at timestamp with time zone,
    idempotency_key character varying(512),
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT ck_memories_created_by CHECK ((created_by = ANY (ARRAY['agent'::text, 'user'::text, 'extractor'::text]))),
    CONSTRAINT ck_memories_scope CHECK ((scope_type = ANY (ARRAY['user'::text, 'project'::text, 'agent'::text])))
);

CREATE TABLE public.model_usage (
    tenant_id text NOT NULL,
    idempotency_key character varying(512) NOT NULL,
    session_id uuid NOT NULL,
    agent text NOT NULL,
    provider text NOT NULL,
    model text NOT NULL,
    purpose character varying(16) DEFAULT 'chat'::character varying NOT NULL,
    input_tokens bigint NOT NULL,
    output_tokens bigint NOT NULL,
    cached_tokens bigint DEFAULT '0'::bigint NOT NULL,
    cost_usd numeric(20,9),
    day date NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    tool_calls integer DEFAULT 0 NOT NULL,
    CONSTRAINT ck_model_usage_tokens CHECK (((input_tokens >= 0) AND (output_tokens >= 0) AND (cached_tokens >= 0)))
);

CREATE UNLOGGED TABLE public.rate_limits (
    limiter text NOT NULL,
    subject text NOT NULL,
    tat double precision NOT NULL,
    allowed boolean NOT NULL
);

CREATE TABLE public.session_archives (
    tenant_id text NOT NULL,
    session_id uuid NOT NULL,
    snapshot_key text NOT NULL,
    snapshot_sha256 text NOT NULL,
    snapshot_bytes bigint NOT NULL,
    item_count integer NOT NULL,
    archived_at timestamp with time zone DEFAULT now() NOT NULL
);

CREATE TABLE public.session_spend (
    tenant_id text NOT NULL,
    session_id uuid NOT NULL,
    tokens bigint DEFAULT '0'::bigint NOT NULL,
    cost_usd numeric(20,9) DEFAULT '0'::numeric NOT NULL,
    unpriced_replies integer DEFAULT 0 NOT NULL,
    tool_calls integer DEFAULT 0 NOT NULL,
    sub_agents integer DEFAULT 0 NOT NULL
);

CREATE TABLE public.sessions (
    id uuid NOT NULL,
    tenant_id character varying(128) NOT NULL,
    title text NOT NULL,
    status character varying(32) NOT NULL,
    model_config jsonb NOT NULL,
    workflow_id character varying(256),
    next_ordinal bigint DEFAULT '1'::bigint NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    parent_id uuid,
    root_id uuid,
    agent_name text DEFAULT 'agent'::text NOT NULL,
    workflow_run_id character varying(256),
    project text,
    workspace_sha256 text,
    workspace_bytes bigint,
    wait_detail jsonb,
    agent_definition text DEFAULT 'default'::text NOT NULL,
    approvals jsonb,
    CONSTRAINT ck_sessions_status CHECK (((status)::text = ANY ((ARRAY['created'::character varying, 'running'::character varying, 'waiting_approval'::character varying, 'waiting_device'::character varying, 'completed'::character varying, 'failed'::character varying, 'cancelled'::character varying, 'archived'::character varying, 'no_answer'::character varying, 'waiting_model'::character varying, 'budget_exhausted'::character varying, 'quota_exhausted'::character varying, 'frozen'::character varying])::text[])))
);

CREATE TABLE public.tenant_controls (
    tenant_id text NOT NULL,
    tokens_per_day bigint,
    cost_usd_per_day numeric(20,9),
    tokens_per_month bigint,
    cost_usd_per_month numeric(20,9),
    running_tasks integer,
    parked_tasks integer,
    starts_per_minute integer,
    frozen boolean DEFAULT false NOT NULL,
    frozen_by text,
    frozen_at timestamp with time zone,
    updated_by text,
    updated_at timestamp with time zone DEFAULT now() NOT NULL
);

CREATE TABLE public.tenant_spend (
    tenant_id text NOT NULL,
    day date NOT NULL,
    tokens bigint DEFAULT '0'::bigint NOT NULL,
    cost_usd numeric(20,9) DEFAULT '0'::numeric NOT NULL,
    unpriced_replies integer DEFAULT 0 NOT NULL
);

CREATE TABLE public.tool_effects (
    tenant_id text NOT NULL,
    idempotency_key character varying(512) NOT NULL,
    session_id uuid NOT NULL,
    tool_call_id character varying(128) NOT NULL,
    tool_name character varying(128) NOT NULL,
    state character varying(16) NOT NULL,
    attempt integer DEFAULT 1 NOT NULL,
    started_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    settled_at timestamp with time zone,
    CONSTRAINT ck_tool_effects_state CHECK (((state)::text = ANY ((ARRAY['started'::character varying, 'retrying'::character varying, 'completed'::character varying, 'failed'::character varying, 'reconciled'::character varying, 'in_doubt'::character varying])::text[])))
);

CREATE TABLE public.trajectory_outbox (
    event_id uuid NOT NULL,
    tenant_id text NOT NULL,
    session_id uuid NOT NULL,
    kind text NOT NULL,
    attributes jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    sent_at timestamp with time zone
);

CREATE TABLE public.turns (
    id uuid NOT NULL,
    tenant_id text NOT NULL,
    session_id uuid NOT NULL,
    turn_no integer NOT NULL,
    first_ordinal bigint NOT NULL,
    context_config_id uuid,
    created_at timestamp with time zone DEFAULT now() NOT NULL
);

ALTER TABLE ONLY public.admissions
    ADD CONSTRAINT admissions_pkey PRIMARY KEY (tenant_id, idempotency_key);

ALTER TABLE ONLY public.agent_artifact_refs
    ADD CONSTRAINT agent_artifact_refs_pkey PRIMARY KEY (tenant_id, owner_type, owner_id, artifact_id);

ALTER TABLE ONLY public.agent_artifacts
    ADD CONSTRAINT agent_artifacts_pkey PRIMARY KEY (tenant_id, artifact_id);

ALTER TABLE ONLY public.api_keys
    ADD CONSTRAINT api_keys_pkey PRIMARY KEY (key_id);

ALTER TABLE ONLY public.compactions
    ADD CONSTRAINT compactions_pkey PRIMARY KEY (tenant_id, id);

ALTER TABLE ONLY public.context_blobs
    ADD CONSTRAINT context_blobs_pkey PRIMARY KEY (tenant_id, sha256);

ALTER TABLE ONLY public.context_configs
    ADD CONSTRAINT context_configs_pkey PRIMARY KEY (tenant_id, id);

ALTER TABLE ONLY public.decision_requests
    ADD CONSTRAINT decision_requests_pkey PRIMARY KEY (tenant_id, id);

ALTER TABLE ONLY public.device_calls
    ADD CONSTRAINT device_calls_pkey PRIMARY KEY (tenant_id, id);

ALTER TABLE ONLY public.devices
    ADD CONSTRAINT devices_pkey PRIMARY KEY (tenant_id, device_id);

ALTER TABLE ONLY public.items
    ADD CONSTRAINT items_pkey PRIMARY KEY (tenant_id, id);

ALTER TABLE ONLY public.memories
    ADD CONSTRAINT memories_pkey PRIMARY KEY (tenant_id, id);

ALTER TABLE ONLY public.model_usage
    ADD CONSTRAINT model_usage_pkey PRIMARY KEY (tenant_id, idempotency_key);

ALTER TABLE ONLY public.rate_limits
    ADD CONSTRAINT rate_limits_pkey PRIMARY KEY (limiter, subject);

ALTER TABLE ONLY public.session_archives
    ADD CONSTRAINT session_archives_pkey PRIMARY KEY (tenant_id, session_id);

ALTER TABLE ONLY public.session_spend
    ADD CONSTRAINT session_spend_pkey PRIMARY KEY (tenant_id, session_id);

ALTER TABLE ONLY public.sessions
    ADD CONSTRAINT sessions_pkey PRIMARY KEY (tenant_id, id);

ALTER TABLE ONLY public.tenant_controls
    ADD CONSTRAINT tenant_controls_pkey PRIMARY KEY (tenant_id);

ALTER TABLE ONLY public.tenant_spend
    ADD CONSTRAINT tenant_spend_pkey PRIMARY KEY (tenant_id, day);

ALTER TABLE ONLY public.tool_effects
    ADD CONSTRAINT tool_effects_pkey PRIMARY KEY (tenant_id, idempotency_key);

ALTER TABLE ONLY public.trajectory_outbox
    ADD CONSTRAINT trajectory_outbox_pkey PRIMARY KEY (tenant_id, event_id);

ALTER TABLE ONLY public.turns
    ADD CONSTRAINT turns_pkey PRIMARY KEY (tenant_id, id);

ALTER TABLE ONLY public.agent_artifacts
    ADD CONSTRAINT uq_artifacts_tenant_sha UNIQUE (tenant_id, sha256);

ALTER TABLE ONLY public.compactions
    ADD CONSTRAINT uq_compactions_idempotency_key UNIQUE (tenant_id, idempotency_key);

ALTER TABLE ONLY public.compactions
    ADD CONSTRAINT uq_compactions_session_version UNIQUE (tenant_id, session_id, version);

ALTER TABLE ONLY public.context_configs
    ADD CONSTRAINT uq_context_configs_tenant_sha UNIQUE (tenant_id, sha256);

ALTER TABLE ONLY public.device_calls
    ADD CONSTRAINT uq_device_calls_key UNIQUE (tenant_id, idempotency_key);

ALTER TABLE ONLY public.items
    ADD CONSTRAINT uq_items_session_ordinal UNIQUE (tenant_id, session_id, ordinal);

ALTER TABLE ONLY public.memories
    ADD CONSTRAINT uq_memories_idempotency_key UNIQUE (tenant_id, idempotency_key);

ALTER TABLE ONLY public.turns
    ADD CONSTRAINT uq_turns_session_no UNIQUE (tenant_id, session_id, turn_no);

CREATE INDEX ix_admissions_open ON public.admissions USING btree (tenant_id, budget_session_id) WHERE open;

CREATE INDEX ix_api_keys_tenant ON public.api_keys USING btree (tenant_id);

CREATE INDEX ix_artifact_refs_artifact ON public.agent_artifact_refs USING btree (tenant_id, artifact_id);

CREATE INDEX ix_artifact_refs_history_holds ON public.agent_artifact_refs USING btree (tenant_id, owner_id, expires_at) WHERE (owner_type = 'workflow_history'::text);

CREATE INDEX ix_artifacts_unreachable ON public.agent_artifacts USING btree (unreachable_since) WHERE (status = 'unreachable'::text);

CREATE INDEX ix_decision_requests_created ON public.decision_requests USING btree (created_at);

CREATE INDEX ix_device_calls_device ON public.device_calls USING btree (tenant_id, device_id, state);

CREATE INDEX ix_items_artifact ON public.items USING btree (tenant_id, artifact_id) WHERE (artifact_id IS NOT NULL);

CREATE INDEX ix_items_session_tool_call ON public.items USING btree (tenant_id, session_id, tool_call_id) WHERE (tool_call_id IS NOT NULL);

CREATE INDEX ix_memories_scope_live ON public.memories USING btree (tenant_id, scope_type, scope_id, created_at) WHERE (deleted_at IS NULL);

CREATE INDEX ix_model_usage_day ON public.model_usage USING btree (tenant_id, day);

CREATE INDEX ix_model_usage_session ON public.model_usage USING btree (tenant_id, session_id);

CREATE INDEX ix_sessions_id ON public.sessions USING btree (id);

CREATE INDEX ix_sessions_parent ON public.sessions USING btree (tenant_id, parent_id);

CREATE INDEX ix_sessions_root ON public.sessions USING btree (tenant_id, root_id);

CREATE INDEX ix_sessions_tenant_id ON public.sessions USING btree (tenant_id);

CREATE INDEX ix_sessions_tenant_status ON public.sessions USING btree (tenant_id, status);

CREATE INDEX ix_tool_effects_session ON public.tool_effects USING btree (tenant_id, session_id);

CREATE INDEX ix_trajectory_outbox_unsent ON public.trajectory_outbox USING btree (created_at) WHERE (sent_at IS NULL);

CREATE UNIQUE INDEX ux_items_key_hash ON public.items USING btree (tenant_id, public.item_key_hash((tenant_id)::text, (idempotency_key)::text));

CREATE TRIGGER items_notify AFTER INSERT ON public.items FOR EACH ROW EXECUTE FUNCTION public.agent_notify_item();

CREATE TRIGGER sessions_notify_status AFTER UPDATE ON public.sessions FOR EACH ROW WHEN ((((old.status)::text IS DISTINCT FROM (new.status)::text) OR (old.wait_detail IS DISTINCT FROM new.wait_detail))) EXECUTE FUNCTION public.agent_notify_status();

ALTER TABLE ONLY public.session_archives
    ADD CONSTRAINT fk_archives_session FOREIGN KEY (tenant_id, session_id) REFERENCES public.sessions(tenant_id, id);

ALTER TABLE ONLY public.compactions
    ADD CONSTRAINT fk_compactions_previous FOREIGN KEY (tenant_id, previous_compaction_id) REFERENCES public.compactions(tenant_id, id);

ALTER TABLE ONLY public.compactions
    ADD CONSTRAINT fk_compactions_session FOREIGN KEY (tenant_id, session_id) REFERENCES public.sessions(tenant_id, id);

ALTER TABLE ONLY public.items
    ADD CONSTRAINT fk_items_artifact FOREIGN KEY (tenant_id, artifact_id) REFERENCES public.agent_artifacts(tenant_id, artifact_id);

ALTER TABLE ONLY public.items
    ADD CONSTRAINT fk_items_session FOREIGN KEY (tenant_id, session_id) REFERENCES public.sessions(tenant_id, id);

ALTER TABLE ONLY public.items
    ADD CONSTRAINT fk_items_turn FOREIGN KEY (tenant_id, turn_id) REFERENCES public.turns(tenant_id, id);

ALTER TABLE ONLY public.memories
    ADD CONSTRAINT fk_memories_supersedes FOREIGN KEY (tenant_id, supersedes_id) REFERENCES public.memories(tenant_id, id);

ALTER TABLE ONLY public.agent_artifact_refs
    ADD CONSTRAINT fk_refs_artifact FOREIGN KEY (tenant_id, artifact_id) REFERENCES public.agent_artifacts(tenant_id, artifact_id);

ALTER TABLE ONLY public.sessions
    ADD CONSTRAINT fk_sessions_parent FOREIGN KEY (tenant_id, parent_id) REFERENCES public.sessions(tenant_id, id);

ALTER TABLE ONLY public.sessions
    ADD CONSTRAINT fk_sessions_root FOREIGN KEY (tenant_id, root_id) REFERENCES public.sessions(tenant_id, id);

ALTER TABLE ONLY public.turns
    ADD CONSTRAINT fk_turns_config FOREIGN KEY (tenant_id, context_config_id) REFERENCES public.context_configs(tenant_id, id);

ALTER TABLE ONLY public.turns
    ADD CONSTRAINT fk_turns_session FOREIGN KEY (tenant_id, session_id) REFERENCES public.sessions(tenant_id, id);
