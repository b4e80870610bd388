--
-- PostgreSQL database dump
--


-- Dumped from database version 15.20 (Debian 15.20-0+deb12u1)
-- Dumped by pg_dump version 15.20 (Debian 15.20-0+deb12u1)

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

--
-- Name: chongming_v2_fixture; Type: SCHEMA; Schema: -; Owner: -
--

CREATE SCHEMA chongming_v2_fixture;


SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: commands; Type: TABLE; Schema: chongming_v2_fixture; Owner: -
--

CREATE TABLE chongming_v2_fixture.commands (
    seq bigint NOT NULL,
    command_id text NOT NULL,
    task_id text NOT NULL,
    action text NOT NULL,
    issued_by text NOT NULL,
    issued_at timestamp with time zone NOT NULL,
    reason text,
    bucket bigint,
    claimed_by text,
    lease_until timestamp with time zone,
    completed_at timestamp with time zone,
    result text
);


--
-- Name: commands_seq_seq; Type: SEQUENCE; Schema: chongming_v2_fixture; Owner: -
--

ALTER TABLE chongming_v2_fixture.commands ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME chongming_v2_fixture.commands_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: schema_version; Type: TABLE; Schema: chongming_v2_fixture; Owner: -
--

CREATE TABLE chongming_v2_fixture.schema_version (
    singleton boolean DEFAULT true NOT NULL,
    version integer NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT schema_version_singleton_check CHECK (singleton)
);


--
-- Name: tasks; Type: TABLE; Schema: chongming_v2_fixture; Owner: -
--

CREATE TABLE chongming_v2_fixture.tasks (
    seq bigint NOT NULL,
    task_id text NOT NULL,
    name text NOT NULL,
    status text NOT NULL,
    status_version bigint NOT NULL,
    attempt bigint NOT NULL,
    max_attempts bigint NOT NULL,
    label text,
    description text,
    tags text[] DEFAULT '{}'::text[] NOT NULL,
    priority bigint NOT NULL,
    bucket bigint,
    bucket_key text,
    pipeline_id text,
    node_id text,
    progress json,
    last_heartbeat_at timestamp with time zone,
    failure jsonb,
    outcome json,
    created_at timestamp with time zone,
    updated_at timestamp with time zone,
    started_at timestamp with time zone,
    finished_at timestamp with time zone,
    retry_at timestamp with time zone,
    lease_owner text,
    lease_until timestamp with time zone,
    executor text,
    pid bigint,
    paused_in_place boolean DEFAULT false NOT NULL,
    attempts jsonb DEFAULT '[]'::jsonb NOT NULL,
    id_fold text NOT NULL,
    name_fold text NOT NULL,
    label_fold text NOT NULL,
    paused_seconds double precision DEFAULT 0 NOT NULL
);


--
-- Name: tasks_seq_seq; Type: SEQUENCE; Schema: chongming_v2_fixture; Owner: -
--

ALTER TABLE chongming_v2_fixture.tasks ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME chongming_v2_fixture.tasks_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: transitions; Type: TABLE; Schema: chongming_v2_fixture; Owner: -
--

CREATE TABLE chongming_v2_fixture.transitions (
    task_id text NOT NULL,
    status_version bigint NOT NULL,
    from_status text NOT NULL,
    to_status text NOT NULL,
    trigger text NOT NULL,
    actor text NOT NULL,
    reason text,
    at timestamp with time zone NOT NULL
);


--
-- Data for Name: commands; Type: TABLE DATA; Schema: chongming_v2_fixture; Owner: -
--

INSERT INTO chongming_v2_fixture.commands OVERRIDING SYSTEM VALUE VALUES (3, 'c2', 'task-running', 'resume', 'ops@host-a', '2026-01-01 00:00:59+00', NULL, 4, NULL, NULL, NULL, NULL);
INSERT INTO chongming_v2_fixture.commands OVERRIDING SYSTEM VALUE VALUES (4, 'c3', 'task-running', 'stop', 'ops@host-a', '2026-01-01 00:01:00+00', NULL, 4, NULL, NULL, NULL, NULL);
INSERT INTO chongming_v2_fixture.commands OVERRIDING SYSTEM VALUE VALUES (2, 'c1', 'task-running', 'pause', 'ops@host-a', '2026-01-01 00:00:58+00', NULL, 4, 'node-a@host-1', '2026-01-01 00:02:00+00', NULL, NULL);
INSERT INTO chongming_v2_fixture.commands OVERRIDING SYSTEM VALUE VALUES (1, 'c0', 'task-running', 'stop', 'ops@host-a', '2026-01-01 00:00:57+00', NULL, 4, 'node-a@host-1', NULL, '2026-01-01 00:01:00+00', 'applied');


--
-- Data for Name: schema_version; Type: TABLE DATA; Schema: chongming_v2_fixture; Owner: -
--

INSERT INTO chongming_v2_fixture.schema_version VALUES (true, 2, '2026-12-02 20:06:10.110677+00');


--
-- Data for Name: tasks; Type: TABLE DATA; Schema: chongming_v2_fixture; Owner: -
--

INSERT INTO chongming_v2_fixture.tasks OVERRIDING SYSTEM VALUE VALUES (1, 'task-pending', 'job', 'pending', 0, 0, 3, '任务 pending', NULL, '{io,数据}', -1, 0, 'tenant-0', NULL, NULL, NULL, NULL, NULL, NULL, '2026-01-01 00:00:00+00', '2026-01-01 00:00:00+00', NULL, NULL, NULL, NULL, NULL, NULL, NULL, false, '[]', 'task-pending', 'job', '任务 pending', 0);
INSERT INTO chongming_v2_fixture.tasks OVERRIDING SYSTEM VALUE VALUES (2, 'task-blocked', 'etl.同步', 'blocked', 1, 0, 3, '任务 blocked', NULL, '{tag-1}', 0, 1, 'tenant-1', NULL, NULL, NULL, NULL, NULL, NULL, '2026-01-01 00:00:00+00', '2026-01-01 00:00:01+00', NULL, NULL, NULL, NULL, NULL, NULL, NULL, false, '[]', 'task-blocked', 'etl.同步', '任务 blocked', 0);
INSERT INTO chongming_v2_fixture.tasks OVERRIDING SYSTEM VALUE VALUES (3, 'task-queued', 'job', 'queued', 1, 0, 3, '任务 queued', NULL, '{tag-2}', 1, 2, 'tenant-2', NULL, NULL, NULL, NULL, NULL, NULL, '2026-01-01 00:00:01+00', '2026-01-01 00:00:02+00', NULL, NULL, NULL, NULL, NULL, NULL, NULL, false, '[]', 'task-queued', 'job', '任务 queued', 0);
INSERT INTO chongming_v2_fixture.tasks OVERRIDING SYSTEM VALUE VALUES (4, 'task-starting', 'etl.同步', 'starting', 2, 1, 3, '任务 starting', NULL, '{io,数据}', 2, 3, 'tenant-3', NULL, NULL, NULL, NULL, NULL, NULL, '2026-01-01 00:00:02+00', '2026-01-01 00:00:04+00', '2026-01-01 00:00:04+00', NULL, NULL, NULL, NULL, 'thread', NULL, false, '[]', 'task-starting', 'etl.同步', '任务 starting', 0);
INSERT INTO chongming_v2_fixture.tasks OVERRIDING SYSTEM VALUE VALUES (5, 'task-running', 'job', 'running', 3, 1, 3, '任务 running', NULL, '{tag-4}', -1, 4, 'tenant-4', NULL, NULL, '{"done":4,"total":40,"unit":"行","message":"第 2 批"}', '2026-01-01 00:00:07+00', NULL, NULL, '2026-01-01 00:00:04+00', '2026-01-01 00:00:07+00', '2026-01-01 00:00:06+00', NULL, NULL, 'node-a@host-1', '2026-01-01 00:00:37+00', 'thread', 4242, false, '[]', 'task-running', 'job', '任务 running', 0);
INSERT INTO chongming_v2_fixture.tasks OVERRIDING SYSTEM VALUE VALUES (6, 'task-pausing', 'etl.同步', 'pausing', 4, 1, 3, '任务 pausing', NULL, '{tag-5}', 0, 5, 'tenant-5', NULL, NULL, '{"done":5,"total":40,"unit":"行","message":"第 2 批"}', '2026-01-01 00:00:11+00', NULL, NULL, '2026-01-01 00:00:07+00', '2026-01-01 00:00:11+00', '2026-01-01 00:00:09+00', NULL, NULL, 'node-a@host-1', '2026-01-01 00:00:41+00', 'thread', 4242, false, '[]', 'task-pausing', 'etl.同步', '任务 pausing', 0);
INSERT INTO chongming_v2_fixture.tasks OVERRIDING SYSTEM VALUE VALUES (7, 'task-paused', 'job', 'paused', 5, 1, 3, '任务 paused', NULL, '{io,数据}', 1, 6, 'tenant-6', NULL, NULL, NULL, NULL, NULL, NULL, '2026-01-01 00:00:11+00', '2026-01-01 00:00:16+00', '2026-01-01 00:00:13+00', NULL, NULL, NULL, NULL, 'thread', 4242, true, '[]', 'task-paused', 'job', '任务 paused', 0);
INSERT INTO chongming_v2_fixture.tasks OVERRIDING SYSTEM VALUE VALUES (8, 'task-retry_wait', 'etl.同步', 'retry_wait', 4, 1, 3, '任务 retry_wait', NULL, '{tag-7}', 2, 7, 'tenant-7', NULL, NULL, NULL, NULL, '{"kind": "exception", "message": "flaky upstream", "retryable": true, "traceback": null, "exception_type": "RuntimeError"}', NULL, '2026-01-01 00:00:16+00', '2026-01-01 00:00:20+00', '2026-01-01 00:00:18+00', NULL, '2026-01-01 00:00:50+00', NULL, NULL, 'thread', 4242, false, '[{"number": 1, "status": "retry_wait", "failure": {"kind": "exception", "message": "flaky upstream", "retryable": true, "traceback": null, "exception_type": "RuntimeError"}, "ended_at": "2026-01-01T00:00:20+00:00", "started_at": "2026-01-01T00:00:18+00:00", "paused_seconds": 0.0}]', 'task-retry_wait', 'etl.同步', '任务 retry_wait', 0);
INSERT INTO chongming_v2_fixture.tasks OVERRIDING SYSTEM VALUE VALUES (9, 'task-stopping', 'job', 'stopping', 4, 1, 3, '任务 stopping', NULL, '{tag-8}', -1, 8, 'tenant-8', NULL, NULL, '{"done":8,"total":40,"unit":"行","message":"第 2 批"}', '2026-01-01 00:00:24+00', NULL, NULL, '2026-01-01 00:00:20+00', '2026-01-01 00:00:24+00', '2026-01-01 00:00:22+00', NULL, NULL, 'node-a@host-1', '2026-01-01 00:00:54+00', 'thread', 4242, false, '[]', 'task-stopping', 'job', '任务 stopping', 0);
INSERT INTO chongming_v2_fixture.tasks OVERRIDING SYSTEM VALUE VALUES (10, 'task-succeeded', 'etl.同步', 'succeeded', 4, 1, 3, '任务 succeeded', NULL, '{io,数据}', 0, 9, 'tenant-9', NULL, NULL, NULL, NULL, NULL, '{"rows":42}', '2026-01-01 00:00:24+00', '2026-01-01 00:00:28+00', '2026-01-01 00:00:26+00', '2026-01-01 00:00:28+00', NULL, NULL, NULL, 'thread', 4242, false, '[{"number": 1, "status": "succeeded", "failure": null, "ended_at": "2026-01-01T00:00:28+00:00", "started_at": "2026-01-01T00:00:26+00:00", "paused_seconds": 0.0}]', 'task-succeeded', 'etl.同步', '任务 succeeded', 0);
INSERT INTO chongming_v2_fixture.tasks OVERRIDING SYSTEM VALUE VALUES (11, 'task-failed', 'job', 'failed', 4, 1, 3, '任务 failed', NULL, '{tag-10}', 1, 10, 'tenant-10', NULL, NULL, NULL, NULL, '{"kind": "exception", "message": "boom", "retryable": true, "traceback": null, "exception_type": "RuntimeError"}', NULL, '2026-01-01 00:00:28+00', '2026-01-01 00:00:32+00', '2026-01-01 00:00:30+00', '2026-01-01 00:00:32+00', NULL, NULL, NULL, 'thread', 4242, false, '[{"number": 1, "status": "failed", "failure": {"kind": "exception", "message": "boom", "retryable": true, "traceback": null, "exception_type": "RuntimeError"}, "ended_at": "2026-01-01T00:00:32+00:00", "started_at": "2026-01-01T00:00:30+00:00", "paused_seconds": 0.0}]', 'task-failed', 'job', '任务 failed', 0);
INSERT INTO chongming_v2_fixture.tasks OVERRIDING SYSTEM VALUE VALUES (12, 'task-stopped', 'etl.同步', 'stopped', 5, 1, 3, '任务 stopped', NULL, '{tag-11}', 2, 11, 'tenant-11', NULL, NULL, NULL, NULL, '{"kind": "cancelled", "message": "stopped: release window", "retryable": false, "traceback": null, "exception_type": null}', NULL, '2026-01-01 00:00:32+00', '2026-01-01 00:00:37+00', '2026-01-01 00:00:34+00', '2026-01-01 00:00:37+00', NULL, NULL, NULL, 'thread', 4242, false, '[{"number": 1, "status": "stopped", "failure": {"kind": "cancelled", "message": "stopped: release window", "retryable": false, "traceback": null, "exception_type": null}, "ended_at": "2026-01-01T00:00:37+00:00", "started_at": "2026-01-01T00:00:34+00:00", "paused_seconds": 0.0}]', 'task-stopped', 'etl.同步', '任务 stopped', 0);
INSERT INTO chongming_v2_fixture.tasks OVERRIDING SYSTEM VALUE VALUES (13, 'task-cancelled', 'job', 'cancelled', 2, 0, 3, '任务 cancelled', NULL, '{io,数据}', -1, 12, 'tenant-12', NULL, NULL, NULL, NULL, '{"kind": "cancelled", "message": "cancelled: fail_fast", "retryable": false, "traceback": null, "exception_type": null}', NULL, '2026-01-01 00:00:37+00', '2026-01-01 00:00:39+00', NULL, '2026-01-01 00:00:39+00', NULL, NULL, NULL, NULL, NULL, false, '[]', 'task-cancelled', 'job', '任务 cancelled', 0);
INSERT INTO chongming_v2_fixture.tasks OVERRIDING SYSTEM VALUE VALUES (14, 'task-skipped', 'etl.同步', 'skipped', 1, 0, 3, '任务 skipped', NULL, '{tag-13}', 0, 13, 'tenant-13', NULL, NULL, NULL, NULL, '{"kind": "condition_false", "message": "skipped: condition false", "retryable": false, "traceback": null, "exception_type": null}', NULL, '2026-01-01 00:00:39+00', '2026-01-01 00:00:40+00', NULL, '2026-01-01 00:00:40+00', NULL, NULL, NULL, NULL, NULL, false, '[]', 'task-skipped', 'etl.同步', '任务 skipped', 0);
INSERT INTO chongming_v2_fixture.tasks OVERRIDING SYSTEM VALUE VALUES (15, 'task-lost', 'job', 'lost', 4, 1, 3, '任务 lost', NULL, '{tag-14}', 1, 14, 'tenant-14', NULL, NULL, NULL, NULL, '{"kind": "lost", "message": "worker vanished", "retryable": true, "traceback": null, "exception_type": null}', NULL, '2026-01-01 00:00:40+00', '2026-01-01 00:00:44+00', '2026-01-01 00:00:42+00', '2026-01-01 00:00:44+00', NULL, NULL, NULL, 'thread', 4242, false, '[{"number": 1, "status": "lost", "failure": {"kind": "lost", "message": "worker vanished", "retryable": true, "traceback": null, "exception_type": null}, "ended_at": "2026-01-01T00:00:44+00:00", "started_at": "2026-01-01T00:00:42+00:00", "paused_seconds": 0.0}]', 'task-lost', 'job', '任务 lost', 0);
INSERT INTO chongming_v2_fixture.tasks OVERRIDING SYSTEM VALUE VALUES (16, 'long-history', 'job', 'pausing', 12, 1, 1, NULL, NULL, '{long}', 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, '2026-01-01 00:00:44+00', '2026-01-01 00:00:56+00', '2026-01-01 00:00:46+00', NULL, NULL, NULL, NULL, 'thread', 4242, false, '[]', 'long-history', 'job', '', 0);


--
-- Data for Name: transitions; Type: TABLE DATA; Schema: chongming_v2_fixture; Owner: -
--

INSERT INTO chongming_v2_fixture.transitions VALUES ('task-blocked', 1, 'pending', 'blocked', 'scheduler:blocked', 'system', 'waiting for upstream', '2026-01-01 00:00:01+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('task-queued', 1, 'pending', 'queued', 'scheduler:queued', 'system', NULL, '2026-01-01 00:00:02+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('task-starting', 1, 'pending', 'queued', 'scheduler:queued', 'system', NULL, '2026-01-01 00:00:03+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('task-starting', 2, 'queued', 'starting', 'scheduler:dispatched', 'system', NULL, '2026-01-01 00:00:04+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('task-running', 1, 'pending', 'queued', 'scheduler:queued', 'system', NULL, '2026-01-01 00:00:05+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('task-running', 2, 'queued', 'starting', 'scheduler:dispatched', 'system', NULL, '2026-01-01 00:00:06+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('task-running', 3, 'starting', 'running', 'executor:launched', 'system', NULL, '2026-01-01 00:00:07+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('task-pausing', 1, 'pending', 'queued', 'scheduler:queued', 'system', NULL, '2026-01-01 00:00:08+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('task-pausing', 2, 'queued', 'starting', 'scheduler:dispatched', 'system', NULL, '2026-01-01 00:00:09+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('task-pausing', 3, 'starting', 'running', 'executor:launched', 'system', NULL, '2026-01-01 00:00:10+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('task-pausing', 4, 'running', 'pausing', 'control:pause', 'ops', 'maintenance', '2026-01-01 00:00:11+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('task-paused', 1, 'pending', 'queued', 'scheduler:queued', 'system', NULL, '2026-01-01 00:00:12+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('task-paused', 2, 'queued', 'starting', 'scheduler:dispatched', 'system', NULL, '2026-01-01 00:00:13+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('task-paused', 3, 'starting', 'running', 'executor:launched', 'system', NULL, '2026-01-01 00:00:14+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('task-paused', 4, 'running', 'pausing', 'control:pause', 'ops', 'maintenance', '2026-01-01 00:00:15+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('task-paused', 5, 'pausing', 'paused', 'runtime:paused', 'system', NULL, '2026-01-01 00:00:16+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('task-retry_wait', 1, 'pending', 'queued', 'scheduler:queued', 'system', NULL, '2026-01-01 00:00:17+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('task-retry_wait', 2, 'queued', 'starting', 'scheduler:dispatched', 'system', NULL, '2026-01-01 00:00:18+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('task-retry_wait', 3, 'starting', 'running', 'executor:launched', 'system', NULL, '2026-01-01 00:00:19+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('task-retry_wait', 4, 'running', 'retry_wait', 'runtime:retry_scheduled', 'system', 'flaky upstream', '2026-01-01 00:00:20+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('task-stopping', 1, 'pending', 'queued', 'scheduler:queued', 'system', NULL, '2026-01-01 00:00:21+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('task-stopping', 2, 'queued', 'starting', 'scheduler:dispatched', 'system', NULL, '2026-01-01 00:00:22+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('task-stopping', 3, 'starting', 'running', 'executor:launched', 'system', NULL, '2026-01-01 00:00:23+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('task-stopping', 4, 'running', 'stopping', 'control:stop', 'ops', 'release window', '2026-01-01 00:00:24+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('task-succeeded', 1, 'pending', 'queued', 'scheduler:queued', 'system', NULL, '2026-01-01 00:00:25+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('task-succeeded', 2, 'queued', 'starting', 'scheduler:dispatched', 'system', NULL, '2026-01-01 00:00:26+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('task-succeeded', 3, 'starting', 'running', 'executor:launched', 'system', NULL, '2026-01-01 00:00:27+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('task-succeeded', 4, 'running', 'succeeded', 'executor:returned', 'system', NULL, '2026-01-01 00:00:28+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('task-failed', 1, 'pending', 'queued', 'scheduler:queued', 'system', NULL, '2026-01-01 00:00:29+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('task-failed', 2, 'queued', 'starting', 'scheduler:dispatched', 'system', NULL, '2026-01-01 00:00:30+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('task-failed', 3, 'starting', 'running', 'executor:launched', 'system', NULL, '2026-01-01 00:00:31+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('task-failed', 4, 'running', 'failed', 'executor:failed', 'system', 'boom', '2026-01-01 00:00:32+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('task-stopped', 1, 'pending', 'queued', 'scheduler:queued', 'system', NULL, '2026-01-01 00:00:33+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('task-stopped', 2, 'queued', 'starting', 'scheduler:dispatched', 'system', NULL, '2026-01-01 00:00:34+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('task-stopped', 3, 'starting', 'running', 'executor:launched', 'system', NULL, '2026-01-01 00:00:35+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('task-stopped', 4, 'running', 'stopping', 'control:stop', 'ops', 'release window', '2026-01-01 00:00:36+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('task-stopped', 5, 'stopping', 'stopped', 'runtime:stopped', 'ops', 'release window', '2026-01-01 00:00:37+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('task-cancelled', 1, 'pending', 'queued', 'scheduler:queued', 'system', NULL, '2026-01-01 00:00:38+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('task-cancelled', 2, 'queued', 'cancelled', 'orchestrator:cancelled', 'system', 'fail_fast', '2026-01-01 00:00:39+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('task-skipped', 1, 'pending', 'skipped', 'orchestrator:skipped', 'system', 'condition false', '2026-01-01 00:00:40+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('task-lost', 1, 'pending', 'queued', 'scheduler:queued', 'system', NULL, '2026-01-01 00:00:41+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('task-lost', 2, 'queued', 'starting', 'scheduler:dispatched', 'system', NULL, '2026-01-01 00:00:42+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('task-lost', 3, 'starting', 'running', 'executor:launched', 'system', NULL, '2026-01-01 00:00:43+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('task-lost', 4, 'running', 'lost', 'runtime:lost', 'system', 'worker vanished', '2026-01-01 00:00:44+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('long-history', 1, 'pending', 'queued', 'scheduler:queued', 'system', NULL, '2026-01-01 00:00:45+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('long-history', 2, 'queued', 'starting', 'scheduler:dispatched', 'system', NULL, '2026-01-01 00:00:46+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('long-history', 3, 'starting', 'running', 'executor:launched', 'system', NULL, '2026-01-01 00:00:47+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('long-history', 4, 'running', 'pausing', 'control:pause', 'ops', 'pause requested', '2026-01-01 00:00:48+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('long-history', 5, 'pausing', 'running', 'runtime:pause_aborted', 'system', 'no checkpoint reached', '2026-01-01 00:00:49+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('long-history', 6, 'running', 'pausing', 'control:pause', 'ops', 'pause requested', '2026-01-01 00:00:50+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('long-history', 7, 'pausing', 'running', 'runtime:pause_aborted', 'system', 'no checkpoint reached', '2026-01-01 00:00:51+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('long-history', 8, 'running', 'pausing', 'control:pause', 'ops', 'pause requested', '2026-01-01 00:00:52+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('long-history', 9, 'pausing', 'running', 'runtime:pause_aborted', 'system', 'no checkpoint reached', '2026-01-01 00:00:53+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('long-history', 10, 'running', 'pausing', 'control:pause', 'ops', 'pause requested', '2026-01-01 00:00:54+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('long-history', 11, 'pausing', 'running', 'runtime:pause_aborted', 'system', 'no checkpoint reached', '2026-01-01 00:00:55+00');
INSERT INTO chongming_v2_fixture.transitions VALUES ('long-history', 12, 'running', 'pausing', 'control:pause', 'ops', 'pause requested', '2026-01-01 00:00:56+00');


--
-- Name: commands_seq_seq; Type: SEQUENCE SET; Schema: chongming_v2_fixture; Owner: -
--

SELECT pg_catalog.setval('chongming_v2_fixture.commands_seq_seq', 4, true);


--
-- Name: tasks_seq_seq; Type: SEQUENCE SET; Schema: chongming_v2_fixture; Owner: -
--

SELECT pg_catalog.setval('chongming_v2_fixture.tasks_seq_seq', 16, true);


--
-- Name: commands commands_pkey; Type: CONSTRAINT; Schema: chongming_v2_fixture; Owner: -
--

ALTER TABLE ONLY chongming_v2_fixture.commands
    ADD CONSTRAINT commands_pkey PRIMARY KEY (command_id);


--
-- Name: commands commands_seq_key; Type: CONSTRAINT; Schema: chongming_v2_fixture; Owner: -
--

ALTER TABLE ONLY chongming_v2_fixture.commands
    ADD CONSTRAINT commands_seq_key UNIQUE (seq);


--
-- Name: schema_version schema_version_pkey; Type: CONSTRAINT; Schema: chongming_v2_fixture; Owner: -
--

ALTER TABLE ONLY chongming_v2_fixture.schema_version
    ADD CONSTRAINT schema_version_pkey PRIMARY KEY (singleton);


--
-- Name: tasks tasks_pkey; Type: CONSTRAINT; Schema: chongming_v2_fixture; Owner: -
--

ALTER TABLE ONLY chongming_v2_fixture.tasks
    ADD CONSTRAINT tasks_pkey PRIMARY KEY (task_id);


--
-- Name: tasks tasks_seq_key; Type: CONSTRAINT; Schema: chongming_v2_fixture; Owner: -
--

ALTER TABLE ONLY chongming_v2_fixture.tasks
    ADD CONSTRAINT tasks_seq_key UNIQUE (seq);


--
-- Name: transitions transitions_pkey; Type: CONSTRAINT; Schema: chongming_v2_fixture; Owner: -
--

ALTER TABLE ONLY chongming_v2_fixture.transitions
    ADD CONSTRAINT transitions_pkey PRIMARY KEY (task_id, status_version);


--
-- Name: commands_open_idx; Type: INDEX; Schema: chongming_v2_fixture; Owner: -
--

CREATE INDEX commands_open_idx ON chongming_v2_fixture.commands USING btree (seq) WHERE (completed_at IS NULL);


--
-- Name: commands_task_idx; Type: INDEX; Schema: chongming_v2_fixture; Owner: -
--

CREATE INDEX commands_task_idx ON chongming_v2_fixture.commands USING btree (task_id, seq);


--
-- Name: tasks_bucket_idx; Type: INDEX; Schema: chongming_v2_fixture; Owner: -
--

CREATE INDEX tasks_bucket_idx ON chongming_v2_fixture.tasks USING btree (bucket);


--
-- Name: tasks_finished_at_idx; Type: INDEX; Schema: chongming_v2_fixture; Owner: -
--

CREATE INDEX tasks_finished_at_idx ON chongming_v2_fixture.tasks USING btree (finished_at);


--
-- Name: tasks_lease_idx; Type: INDEX; Schema: chongming_v2_fixture; Owner: -
--

CREATE INDEX tasks_lease_idx ON chongming_v2_fixture.tasks USING btree (lease_owner, lease_until);


--
-- Name: tasks_lease_until_idx; Type: INDEX; Schema: chongming_v2_fixture; Owner: -
--

CREATE INDEX tasks_lease_until_idx ON chongming_v2_fixture.tasks USING btree (lease_until);


--
-- Name: tasks_name_prefix_idx; Type: INDEX; Schema: chongming_v2_fixture; Owner: -
--

CREATE INDEX tasks_name_prefix_idx ON chongming_v2_fixture.tasks USING btree (name text_pattern_ops);


--
-- Name: tasks_pipeline_idx; Type: INDEX; Schema: chongming_v2_fixture; Owner: -
--

CREATE INDEX tasks_pipeline_idx ON chongming_v2_fixture.tasks USING btree (pipeline_id);


--
-- Name: tasks_status_idx; Type: INDEX; Schema: chongming_v2_fixture; Owner: -
--

CREATE INDEX tasks_status_idx ON chongming_v2_fixture.tasks USING btree (status);


--
-- Name: tasks_tags_idx; Type: INDEX; Schema: chongming_v2_fixture; Owner: -
--

CREATE INDEX tasks_tags_idx ON chongming_v2_fixture.tasks USING gin (tags);


--
-- PostgreSQL database dump complete
--


