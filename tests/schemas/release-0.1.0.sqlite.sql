-- The schema of a database made by thumb-tui 0.1.0 (main at f02a837, before Alembic),
-- as `sqlite3 thumb.db .schema` printed it after `thumb import`.
-- tests/test_migrations.py builds a database from it and upgrades it. Never edit this file.

CREATE TABLE image (
	id INTEGER NOT NULL, 
	"key" VARCHAR NOT NULL, 
	path VARCHAR, 
	set_id INTEGER, 
	double_rating BOOLEAN NOT NULL, 
	PRIMARY KEY (id), 
	CONSTRAINT image_key_not_empty CHECK (length(key) > 0)
);
CREATE UNIQUE INDEX ix_image_key ON image ("key");
CREATE TABLE annotator (
	id INTEGER NOT NULL, 
	name VARCHAR NOT NULL, 
	native_english BOOLEAN, 
	created_at DATETIME NOT NULL, 
	PRIMARY KEY (id), 
	CONSTRAINT annotator_name_not_empty CHECK (length(name) > 0)
);
CREATE UNIQUE INDEX ix_annotator_name ON annotator (name);
CREATE TABLE event_log (
	id INTEGER NOT NULL, 
	at DATETIME NOT NULL, 
	actor VARCHAR NOT NULL, 
	action VARCHAR NOT NULL, 
	table_name VARCHAR NOT NULL, 
	row_id INTEGER, 
	field_name VARCHAR, 
	old_value VARCHAR, 
	new_value VARCHAR, 
	change_id VARCHAR, 
	reverts VARCHAR, 
	PRIMARY KEY (id), 
	CONSTRAINT event_actor_not_empty CHECK (length(actor) > 0)
);
CREATE INDEX ix_event_log_reverts ON event_log (reverts);
CREATE INDEX ix_event_log_change_id ON event_log (change_id);
CREATE TABLE schema_version (
	id INTEGER NOT NULL, 
	version INTEGER NOT NULL, 
	applied_at DATETIME NOT NULL, 
	PRIMARY KEY (id)
);
CREATE TABLE caption (
	id INTEGER NOT NULL, 
	image_id INTEGER NOT NULL, 
	system VARCHAR NOT NULL, 
	text VARCHAR NOT NULL, 
	external_id VARCHAR, 
	PRIMARY KEY (id), 
	CONSTRAINT caption_one_per_system UNIQUE (image_id, system), 
	CONSTRAINT caption_system_not_empty CHECK (length(system) > 0), 
	CONSTRAINT caption_text_not_empty CHECK (length(text) > 0), 
	FOREIGN KEY(image_id) REFERENCES image (id) ON DELETE RESTRICT, 
	UNIQUE (external_id)
);
CREATE INDEX ix_caption_image_id ON caption (image_id);
CREATE TABLE image_reference (
	id INTEGER NOT NULL, 
	image_id INTEGER NOT NULL, 
	position INTEGER NOT NULL, 
	text VARCHAR NOT NULL, 
	PRIMARY KEY (id), 
	CONSTRAINT reference_position_unique UNIQUE (image_id, position), 
	CONSTRAINT reference_position_non_negative CHECK (position >= 0), 
	CONSTRAINT reference_text_not_empty CHECK (length(text) > 0), 
	FOREIGN KEY(image_id) REFERENCES image (id) ON DELETE RESTRICT
);
CREATE INDEX ix_image_reference_image_id ON image_reference (image_id);
CREATE TABLE assignment (
	id INTEGER NOT NULL, 
	image_id INTEGER NOT NULL, 
	annotator_id INTEGER NOT NULL, 
	stage INTEGER NOT NULL, 
	shuffle_seed INTEGER NOT NULL, 
	seconds FLOAT NOT NULL, 
	focus INTEGER NOT NULL, 
	last_viewed_at DATETIME NOT NULL, 
	PRIMARY KEY (id), 
	CONSTRAINT assignment_unique UNIQUE (image_id, annotator_id, stage), 
	CONSTRAINT assignment_stage_valid CHECK (stage IN (1, 2, 3)), 
	CONSTRAINT assignment_seconds_non_negative CHECK (seconds >= 0), 
	CONSTRAINT assignment_focus_non_negative CHECK (focus >= 0), 
	FOREIGN KEY(image_id) REFERENCES image (id) ON DELETE RESTRICT, 
	FOREIGN KEY(annotator_id) REFERENCES annotator (id) ON DELETE RESTRICT
);
CREATE INDEX ix_assignment_image_id ON assignment (image_id);
CREATE INDEX ix_assignment_annotator_id ON assignment (annotator_id);
CREATE TABLE bison_item (
	id INTEGER NOT NULL, 
	"key" VARCHAR NOT NULL, 
	"query" VARCHAR NOT NULL, 
	caption_key VARCHAR, 
	image_a_id INTEGER NOT NULL, 
	image_b_id INTEGER NOT NULL, 
	true_image_id INTEGER NOT NULL, 
	PRIMARY KEY (id), 
	CONSTRAINT bison_two_images CHECK (image_a_id <> image_b_id), 
	CONSTRAINT bison_true_image_is_a_candidate CHECK (true_image_id IN (image_a_id, image_b_id)), 
	CONSTRAINT bison_query_not_empty CHECK (length(query) > 0), 
	FOREIGN KEY(image_a_id) REFERENCES image (id) ON DELETE RESTRICT, 
	FOREIGN KEY(image_b_id) REFERENCES image (id) ON DELETE RESTRICT, 
	FOREIGN KEY(true_image_id) REFERENCES image (id) ON DELETE RESTRICT
);
CREATE UNIQUE INDEX ix_bison_item_key ON bison_item ("key");
CREATE TABLE rating (
	id INTEGER NOT NULL, 
	caption_id INTEGER NOT NULL, 
	annotator_id INTEGER NOT NULL, 
	stage INTEGER NOT NULL, 
	precision INTEGER, 
	recall INTEGER, 
	fluency FLOAT NOT NULL, 
	fluency_type VARCHAR, 
	conciseness FLOAT NOT NULL, 
	conciseness_type VARCHAR, 
	inclusive FLOAT NOT NULL, 
	inclusive_type VARCHAR, 
	note VARCHAR NOT NULL, 
	seconds FLOAT NOT NULL, 
	rubric VARCHAR NOT NULL, 
	created_at DATETIME NOT NULL, 
	updated_at DATETIME NOT NULL, 
	PRIMARY KEY (id), 
	CONSTRAINT rating_unique UNIQUE (caption_id, annotator_id, stage), 
	CONSTRAINT rating_stage_valid CHECK (stage IN (1, 2, 3)), 
	CONSTRAINT rating_precision_1_5 CHECK (precision IS NULL OR precision IN (1, 2, 3, 4, 5)), 
	CONSTRAINT rating_recall_1_5 CHECK (recall IS NULL OR recall IN (1, 2, 3, 4, 5)), 
	CONSTRAINT rating_fluency_range CHECK (fluency >= 0 AND fluency <= 5), 
	CONSTRAINT rating_conciseness_valid CHECK (conciseness IN (0, 0.5)), 
	CONSTRAINT rating_inclusive_valid CHECK (inclusive IN (0, 0.5, 2)), 
	CONSTRAINT rating_seconds_non_negative CHECK (seconds >= 0), 
	CONSTRAINT rating_rubric_not_empty CHECK (length(rubric) > 0), 
	FOREIGN KEY(caption_id) REFERENCES caption (id) ON DELETE RESTRICT, 
	FOREIGN KEY(annotator_id) REFERENCES annotator (id) ON DELETE RESTRICT
);
CREATE INDEX ix_rating_annotator_id ON rating (annotator_id);
CREATE INDEX ix_rating_caption_id ON rating (caption_id);
CREATE TABLE resolution (
	id INTEGER NOT NULL, 
	caption_id INTEGER NOT NULL, 
	resolver_id INTEGER NOT NULL, 
	reasons VARCHAR NOT NULL, 
	note VARCHAR NOT NULL, 
	created_at DATETIME NOT NULL, 
	PRIMARY KEY (id), 
	CONSTRAINT resolution_has_reason CHECK (length(reasons) > 0), 
	UNIQUE (caption_id), 
	FOREIGN KEY(caption_id) REFERENCES caption (id) ON DELETE RESTRICT, 
	FOREIGN KEY(resolver_id) REFERENCES annotator (id) ON DELETE RESTRICT
);
CREATE TABLE fluency_check (
	id INTEGER NOT NULL, 
	caption_id INTEGER NOT NULL, 
	checker_id INTEGER NOT NULL, 
	fluency FLOAT NOT NULL, 
	fluency_type VARCHAR, 
	created_at DATETIME NOT NULL, 
	PRIMARY KEY (id), 
	CONSTRAINT fluency_check_range CHECK (fluency >= 0 AND fluency <= 5), 
	UNIQUE (caption_id), 
	FOREIGN KEY(caption_id) REFERENCES caption (id) ON DELETE RESTRICT, 
	FOREIGN KEY(checker_id) REFERENCES annotator (id) ON DELETE RESTRICT
);
CREATE TABLE metric_score (
	id INTEGER NOT NULL, 
	caption_id INTEGER NOT NULL, 
	metric VARCHAR NOT NULL, 
	signature VARCHAR NOT NULL, 
	value FLOAT NOT NULL, 
	computed_at DATETIME NOT NULL, 
	PRIMARY KEY (id), 
	CONSTRAINT metric_score_unique UNIQUE (caption_id, signature), 
	CONSTRAINT metric_score_metric_not_empty CHECK (length(metric) > 0), 
	FOREIGN KEY(caption_id) REFERENCES caption (id) ON DELETE RESTRICT
);
CREATE INDEX ix_metric_score_caption_id ON metric_score (caption_id);
CREATE INDEX ix_metric_score_signature ON metric_score (signature);
CREATE INDEX ix_metric_score_metric ON metric_score (metric);
CREATE TABLE bison_answer (
	id INTEGER NOT NULL, 
	item_id INTEGER NOT NULL, 
	annotator_id INTEGER NOT NULL, 
	left_image_id INTEGER NOT NULL, 
	answer VARCHAR, 
	seconds FLOAT NOT NULL, 
	created_at DATETIME NOT NULL, 
	updated_at DATETIME NOT NULL, 
	PRIMARY KEY (id), 
	CONSTRAINT bison_answer_unique UNIQUE (item_id, annotator_id), 
	CONSTRAINT bison_answer_valid CHECK (answer IS NULL OR answer IN ('left', 'right', 'both', 'neither')), 
	CONSTRAINT bison_answer_seconds CHECK (seconds >= 0), 
	FOREIGN KEY(item_id) REFERENCES bison_item (id) ON DELETE RESTRICT, 
	FOREIGN KEY(annotator_id) REFERENCES annotator (id) ON DELETE RESTRICT, 
	FOREIGN KEY(left_image_id) REFERENCES image (id) ON DELETE RESTRICT
);
CREATE INDEX ix_bison_answer_annotator_id ON bison_answer (annotator_id);
CREATE INDEX ix_bison_answer_item_id ON bison_answer (item_id);
CREATE TABLE bison_prediction (
	id INTEGER NOT NULL, 
	item_id INTEGER NOT NULL, 
	scorer VARCHAR NOT NULL, 
	signature VARCHAR NOT NULL, 
	score_a FLOAT NOT NULL, 
	score_b FLOAT NOT NULL, 
	chosen_image_id INTEGER, 
	computed_at DATETIME NOT NULL, 
	PRIMARY KEY (id), 
	CONSTRAINT bison_prediction_unique UNIQUE (item_id, signature), 
	FOREIGN KEY(item_id) REFERENCES bison_item (id) ON DELETE RESTRICT, 
	FOREIGN KEY(chosen_image_id) REFERENCES image (id)
);
CREATE INDEX ix_bison_prediction_item_id ON bison_prediction (item_id);
CREATE INDEX ix_bison_prediction_signature ON bison_prediction (signature);
CREATE TRIGGER event_log_no_update
        BEFORE UPDATE ON event_log
        BEGIN SELECT RAISE(ABORT, 'event_log is append-only'); END;
CREATE TRIGGER event_log_no_delete
        BEFORE DELETE ON event_log
        BEGIN SELECT RAISE(ABORT, 'event_log is append-only'); END;
