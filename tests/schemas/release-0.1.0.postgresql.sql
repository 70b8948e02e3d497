-- The schema of a database made by thumb-tui 0.1.0 (main at f02a837, before Alembic),
-- as `pg_dump --schema-only --no-owner --no-privileges` (psql meta-commands, SET lines and comments removed) printed it after `thumb import`.
-- tests/test_migrations.py builds a database from it and upgrades it. Never edit this file.

CREATE FUNCTION public.event_log_append_only() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
        BEGIN RAISE EXCEPTION 'event_log is append-only'; END $$;

CREATE TABLE public.annotator (
    id integer NOT NULL,
    name character varying NOT NULL,
    native_english boolean,
    created_at timestamp with time zone NOT NULL,
    CONSTRAINT annotator_name_not_empty CHECK ((length((name)::text) > 0))
);

CREATE SEQUENCE public.annotator_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.annotator_id_seq OWNED BY public.annotator.id;

CREATE TABLE public.assignment (
    id integer NOT NULL,
    image_id integer NOT NULL,
    annotator_id integer NOT NULL,
    stage integer NOT NULL,
    shuffle_seed integer NOT NULL,
    seconds double precision NOT NULL,
    focus integer NOT NULL,
    last_viewed_at timestamp with time zone NOT NULL,
    CONSTRAINT assignment_focus_non_negative CHECK ((focus >= 0)),
    CONSTRAINT assignment_seconds_non_negative CHECK ((seconds >= (0)::double precision)),
    CONSTRAINT assignment_stage_valid CHECK ((stage = ANY (ARRAY[1, 2, 3])))
);

CREATE SEQUENCE public.assignment_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.assignment_id_seq OWNED BY public.assignment.id;

CREATE TABLE public.bison_answer (
    id integer NOT NULL,
    item_id integer NOT NULL,
    annotator_id integer NOT NULL,
    left_image_id integer NOT NULL,
    answer character varying,
    seconds double precision NOT NULL,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    CONSTRAINT bison_answer_seconds CHECK ((seconds >= (0)::double precision)),
    CONSTRAINT bison_answer_valid CHECK (((answer IS NULL) OR ((answer)::text = ANY ((ARRAY['left'::character varying, 'right'::character varying, 'both'::character varying, 'neither'::character varying])::text[]))))
);

CREATE SEQUENCE public.bison_answer_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.bison_answer_id_seq OWNED BY public.bison_answer.id;

CREATE TABLE public.bison_item (
    id integer NOT NULL,
    key character varying NOT NULL,
    query character varying NOT NULL,
    caption_key character varying,
    image_a_id integer NOT NULL,
    image_b_id integer NOT NULL,
    true_image_id integer NOT NULL,
    CONSTRAINT bison_query_not_empty CHECK ((length((query)::text) > 0)),
    CONSTRAINT bison_true_image_is_a_candidate CHECK (((true_image_id = image_a_id) OR (true_image_id = image_b_id))),
    CONSTRAINT bison_two_images CHECK ((image_a_id <> image_b_id))
);

CREATE SEQUENCE public.bison_item_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.bison_item_id_seq OWNED BY public.bison_item.id;

CREATE TABLE public.bison_prediction (
    id integer NOT NULL,
    item_id integer NOT NULL,
    scorer character varying NOT NULL,
    signature character varying NOT NULL,
    score_a double precision NOT NULL,
    score_b double precision NOT NULL,
    chosen_image_id integer,
    computed_at timestamp with time zone NOT NULL
);

CREATE SEQUENCE public.bison_prediction_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.bison_prediction_id_seq OWNED BY public.bison_prediction.id;

CREATE TABLE public.caption (
    id integer NOT NULL,
    image_id integer NOT NULL,
    system character varying NOT NULL,
    text character varying NOT NULL,
    external_id character varying,
    CONSTRAINT caption_system_not_empty CHECK ((length((system)::text) > 0)),
    CONSTRAINT caption_text_not_empty CHECK ((length((text)::text) > 0))
);

CREATE SEQUENCE public.caption_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.caption_id_seq OWNED BY public.caption.id;

CREATE TABLE public.event_log (
    id integer NOT NULL,
    at timestamp with time zone NOT NULL,
    actor character varying NOT NULL,
    action character varying NOT NULL,
    table_name character varying NOT NULL,
    row_id integer,
    field_name character varying,
    old_value character varying,
    new_value character varying,
    change_id character varying,
    reverts character varying,
    CONSTRAINT event_actor_not_empty CHECK ((length((actor)::text) > 0))
);

CREATE SEQUENCE public.event_log_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.event_log_id_seq OWNED BY public.event_log.id;

CREATE TABLE public.fluency_check (
    id integer NOT NULL,
    caption_id integer NOT NULL,
    checker_id integer NOT NULL,
    fluency double precision NOT NULL,
    fluency_type character varying,
    created_at timestamp with time zone NOT NULL,
    CONSTRAINT fluency_check_range CHECK (((fluency >= (0)::double precision) AND (fluency <= (5)::double precision)))
);

CREATE SEQUENCE public.fluency_check_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.fluency_check_id_seq OWNED BY public.fluency_check.id;

CREATE TABLE public.image (
    id integer NOT NULL,
    key character varying NOT NULL,
    path character varying,
    set_id integer,
    double_rating boolean NOT NULL,
    CONSTRAINT image_key_not_empty CHECK ((length((key)::text) > 0))
);

CREATE SEQUENCE public.image_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.image_id_seq OWNED BY public.image.id;

CREATE TABLE public.image_reference (
    id integer NOT NULL,
    image_id integer NOT NULL,
    "position" integer NOT NULL,
    text character varying NOT NULL,
    CONSTRAINT reference_position_non_negative CHECK (("position" >= 0)),
    CONSTRAINT reference_text_not_empty CHECK ((length((text)::text) > 0))
);

CREATE SEQUENCE public.image_reference_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.image_reference_id_seq OWNED BY public.image_reference.id;

CREATE TABLE public.metric_score (
    id integer NOT NULL,
    caption_id integer NOT NULL,
    metric character varying NOT NULL,
    signature character varying NOT NULL,
    value double precision NOT NULL,
    computed_at timestamp with time zone NOT NULL,
    CONSTRAINT metric_score_metric_not_empty CHECK ((length((metric)::text) > 0))
);

CREATE SEQUENCE public.metric_score_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.metric_score_id_seq OWNED BY public.metric_score.id;

CREATE TABLE public.rating (
    id integer NOT NULL,
    caption_id integer NOT NULL,
    annotator_id integer NOT NULL,
    stage integer NOT NULL,
    "precision" integer,
    recall integer,
    fluency double precision NOT NULL,
    fluency_type character varying,
    conciseness double precision NOT NULL,
    conciseness_type character varying,
    inclusive double precision NOT NULL,
    inclusive_type character varying,
    note character varying NOT NULL,
    seconds double precision NOT NULL,
    rubric character varying NOT NULL,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    CONSTRAINT rating_conciseness_valid CHECK ((conciseness = ANY (ARRAY[(0)::double precision, (0.5)::double precision]))),
    CONSTRAINT rating_fluency_range CHECK (((fluency >= (0)::double precision) AND (fluency <= (5)::double precision))),
    CONSTRAINT rating_inclusive_valid CHECK ((inclusive = ANY (ARRAY[(0)::double precision, (0.5)::double precision, (2)::double precision]))),
    CONSTRAINT rating_precision_1_5 CHECK ((("precision" IS NULL) OR ("precision" = ANY (ARRAY[1, 2, 3, 4, 5])))),
    CONSTRAINT rating_recall_1_5 CHECK (((recall IS NULL) OR (recall = ANY (ARRAY[1, 2, 3, 4, 5])))),
    CONSTRAINT rating_rubric_not_empty CHECK ((length((rubric)::text) > 0)),
    CONSTRAINT rating_seconds_non_negative CHECK ((seconds >= (0)::double precision)),
    CONSTRAINT rating_stage_valid CHECK ((stage = ANY (ARRAY[1, 2, 3])))
);

CREATE SEQUENCE public.rating_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.rating_id_seq OWNED BY public.rating.id;

CREATE TABLE public.resolution (
    id integer NOT NULL,
    caption_id integer NOT NULL,
    resolver_id integer NOT NULL,
    reasons character varying NOT NULL,
    note character varying NOT NULL,
    created_at timestamp with time zone NOT NULL,
    CONSTRAINT resolution_has_reason CHECK ((length((reasons)::text) > 0))
);

CREATE SEQUENCE public.resolution_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.resolution_id_seq OWNED BY public.resolution.id;

CREATE TABLE public.schema_version (
    id integer NOT NULL,
    version integer NOT NULL,
    applied_at timestamp with time zone NOT NULL
);

CREATE SEQUENCE public.schema_version_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.schema_version_id_seq OWNED BY public.schema_version.id;

ALTER TABLE ONLY public.annotator ALTER COLUMN id SET DEFAULT nextval('public.annotator_id_seq'::regclass);

ALTER TABLE ONLY public.assignment ALTER COLUMN id SET DEFAULT nextval('public.assignment_id_seq'::regclass);

ALTER TABLE ONLY public.bison_answer ALTER COLUMN id SET DEFAULT nextval('public.bison_answer_id_seq'::regclass);

ALTER TABLE ONLY public.bison_item ALTER COLUMN id SET DEFAULT nextval('public.bison_item_id_seq'::regclass);

ALTER TABLE ONLY public.bison_prediction ALTER COLUMN id SET DEFAULT nextval('public.bison_prediction_id_seq'::regclass);

ALTER TABLE ONLY public.caption ALTER COLUMN id SET DEFAULT nextval('public.caption_id_seq'::regclass);

ALTER TABLE ONLY public.event_log ALTER COLUMN id SET DEFAULT nextval('public.event_log_id_seq'::regclass);

ALTER TABLE ONLY public.fluency_check ALTER COLUMN id SET DEFAULT nextval('public.fluency_check_id_seq'::regclass);

ALTER TABLE ONLY public.image ALTER COLUMN id SET DEFAULT nextval('public.image_id_seq'::regclass);

ALTER TABLE ONLY public.image_reference ALTER COLUMN id SET DEFAULT nextval('public.image_reference_id_seq'::regclass);

ALTER TABLE ONLY public.metric_score ALTER COLUMN id SET DEFAULT nextval('public.metric_score_id_seq'::regclass);

ALTER TABLE ONLY public.rating ALTER COLUMN id SET DEFAULT nextval('public.rating_id_seq'::regclass);

ALTER TABLE ONLY public.resolution ALTER COLUMN id SET DEFAULT nextval('public.resolution_id_seq'::regclass);

ALTER TABLE ONLY public.schema_version ALTER COLUMN id SET DEFAULT nextval('public.schema_version_id_seq'::regclass);

ALTER TABLE ONLY public.annotator
    ADD CONSTRAINT annotator_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.assignment
    ADD CONSTRAINT assignment_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.assignment
    ADD CONSTRAINT assignment_unique UNIQUE (image_id, annotator_id, stage);

ALTER TABLE ONLY public.bison_answer
    ADD CONSTRAINT bison_answer_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.bison_answer
    ADD CONSTRAINT bison_answer_unique UNIQUE (item_id, annotator_id);

ALTER TABLE ONLY public.bison_item
    ADD CONSTRAINT bison_item_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.bison_prediction
    ADD CONSTRAINT bison_prediction_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.bison_prediction
    ADD CONSTRAINT bison_prediction_unique UNIQUE (item_id, signature);

ALTER TABLE ONLY public.caption
    ADD CONSTRAINT caption_external_id_key UNIQUE (external_id);

ALTER TABLE ONLY public.caption
    ADD CONSTRAINT caption_one_per_system UNIQUE (image_id, system);

ALTER TABLE ONLY public.caption
    ADD CONSTRAINT caption_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.event_log
    ADD CONSTRAINT event_log_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.fluency_check
    ADD CONSTRAINT fluency_check_caption_id_key UNIQUE (caption_id);

ALTER TABLE ONLY public.fluency_check
    ADD CONSTRAINT fluency_check_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.image
    ADD CONSTRAINT image_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.image_reference
    ADD CONSTRAINT image_reference_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.metric_score
    ADD CONSTRAINT metric_score_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.metric_score
    ADD CONSTRAINT metric_score_unique UNIQUE (caption_id, signature);

ALTER TABLE ONLY public.rating
    ADD CONSTRAINT rating_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.rating
    ADD CONSTRAINT rating_unique UNIQUE (caption_id, annotator_id, stage);

ALTER TABLE ONLY public.image_reference
    ADD CONSTRAINT reference_position_unique UNIQUE (image_id, "position");

ALTER TABLE ONLY public.resolution
    ADD CONSTRAINT resolution_caption_id_key UNIQUE (caption_id);

ALTER TABLE ONLY public.resolution
    ADD CONSTRAINT resolution_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.schema_version
    ADD CONSTRAINT schema_version_pkey PRIMARY KEY (id);

CREATE UNIQUE INDEX ix_annotator_name ON public.annotator USING btree (name);

CREATE INDEX ix_assignment_annotator_id ON public.assignment USING btree (annotator_id);

CREATE INDEX ix_assignment_image_id ON public.assignment USING btree (image_id);

CREATE INDEX ix_bison_answer_annotator_id ON public.bison_answer USING btree (annotator_id);

CREATE INDEX ix_bison_answer_item_id ON public.bison_answer USING btree (item_id);

CREATE UNIQUE INDEX ix_bison_item_key ON public.bison_item USING btree (key);

CREATE INDEX ix_bison_prediction_item_id ON public.bison_prediction USING btree (item_id);

CREATE INDEX ix_bison_prediction_signature ON public.bison_prediction USING btree (signature);

CREATE INDEX ix_caption_image_id ON public.caption USING btree (image_id);

CREATE INDEX ix_event_log_change_id ON public.event_log USING btree (change_id);

CREATE INDEX ix_event_log_reverts ON public.event_log USING btree (reverts);

CREATE UNIQUE INDEX ix_image_key ON public.image USING btree (key);

CREATE INDEX ix_image_reference_image_id ON public.image_reference USING btree (image_id);

CREATE INDEX ix_metric_score_caption_id ON public.metric_score USING btree (caption_id);

CREATE INDEX ix_metric_score_metric ON public.metric_score USING btree (metric);

CREATE INDEX ix_metric_score_signature ON public.metric_score USING btree (signature);

CREATE INDEX ix_rating_annotator_id ON public.rating USING btree (annotator_id);

CREATE INDEX ix_rating_caption_id ON public.rating USING btree (caption_id);

CREATE TRIGGER event_log_append_only BEFORE DELETE OR UPDATE ON public.event_log FOR EACH ROW EXECUTE FUNCTION public.event_log_append_only();

ALTER TABLE ONLY public.assignment
    ADD CONSTRAINT assignment_annotator_id_fkey FOREIGN KEY (annotator_id) REFERENCES public.annotator(id) ON DELETE RESTRICT;

ALTER TABLE ONLY public.assignment
    ADD CONSTRAINT assignment_image_id_fkey FOREIGN KEY (image_id) REFERENCES public.image(id) ON DELETE RESTRICT;

ALTER TABLE ONLY public.bison_answer
    ADD CONSTRAINT bison_answer_annotator_id_fkey FOREIGN KEY (annotator_id) REFERENCES public.annotator(id) ON DELETE RESTRICT;

ALTER TABLE ONLY public.bison_answer
    ADD CONSTRAINT bison_answer_item_id_fkey FOREIGN KEY (item_id) REFERENCES public.bison_item(id) ON DELETE RESTRICT;

ALTER TABLE ONLY public.bison_answer
    ADD CONSTRAINT bison_answer_left_image_id_fkey FOREIGN KEY (left_image_id) REFERENCES public.image(id) ON DELETE RESTRICT;

ALTER TABLE ONLY public.bison_item
    ADD CONSTRAINT bison_item_image_a_id_fkey FOREIGN KEY (image_a_id) REFERENCES public.image(id) ON DELETE RESTRICT;

ALTER TABLE ONLY public.bison_item
    ADD CONSTRAINT bison_item_image_b_id_fkey FOREIGN KEY (image_b_id) REFERENCES public.image(id) ON DELETE RESTRICT;

ALTER TABLE ONLY public.bison_item
    ADD CONSTRAINT bison_item_true_image_id_fkey FOREIGN KEY (true_image_id) REFERENCES public.image(id) ON DELETE RESTRICT;

ALTER TABLE ONLY public.bison_prediction
    ADD CONSTRAINT bison_prediction_chosen_image_id_fkey FOREIGN KEY (chosen_image_id) REFERENCES public.image(id);

ALTER TABLE ONLY public.bison_prediction
    ADD CONSTRAINT bison_prediction_item_id_fkey FOREIGN KEY (item_id) REFERENCES public.bison_item(id) ON DELETE RESTRICT;

ALTER TABLE ONLY public.caption
    ADD CONSTRAINT caption_image_id_fkey FOREIGN KEY (image_id) REFERENCES public.image(id) ON DELETE RESTRICT;

ALTER TABLE ONLY public.fluency_check
    ADD CONSTRAINT fluency_check_caption_id_fkey FOREIGN KEY (caption_id) REFERENCES public.caption(id) ON DELETE RESTRICT;

ALTER TABLE ONLY public.fluency_check
    ADD CONSTRAINT fluency_check_checker_id_fkey FOREIGN KEY (checker_id) REFERENCES public.annotator(id) ON DELETE RESTRICT;

ALTER TABLE ONLY public.image_reference
    ADD CONSTRAINT image_reference_image_id_fkey FOREIGN KEY (image_id) REFERENCES public.image(id) ON DELETE RESTRICT;

ALTER TABLE ONLY public.metric_score
    ADD CONSTRAINT metric_score_caption_id_fkey FOREIGN KEY (caption_id) REFERENCES public.caption(id) ON DELETE RESTRICT;

ALTER TABLE ONLY public.rating
    ADD CONSTRAINT rating_annotator_id_fkey FOREIGN KEY (annotator_id) REFERENCES public.annotator(id) ON DELETE RESTRICT;

ALTER TABLE ONLY public.rating
    ADD CONSTRAINT rating_caption_id_fkey FOREIGN KEY (caption_id) REFERENCES public.caption(id) ON DELETE RESTRICT;

ALTER TABLE ONLY public.resolution
    ADD CONSTRAINT resolution_caption_id_fkey FOREIGN KEY (caption_id) REFERENCES public.caption(id) ON DELETE RESTRICT;

ALTER TABLE ONLY public.resolution
    ADD CONSTRAINT resolution_resolver_id_fkey FOREIGN KEY (resolver_id) REFERENCES public.annotator(id) ON DELETE RESTRICT;
