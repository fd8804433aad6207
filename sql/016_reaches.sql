-- The one reach rule of pgeval's SQL API (sweeps' recommendations, a found setting's interval,
-- the acceptance grades, the probes' bounds); Python's is evaluator/measure/operating_points.py
-- (REACH_TOLERANCE, reaches), kept equal by tests/test_operating_points.py.

-- How far under a target a value may be and still reach it: a mean of per-query ratios is a
-- float sum, which may land a few units in the last place under the target.
CREATE OR REPLACE FUNCTION pgeval.reach_tolerance()
RETURNS double precision LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT 1e-12::double precision
$$;

-- Whether p_value (a recall, a measure) reaches p_target within pgeval.reach_tolerance()
-- (NULL when either is NULL). Plain SQL: inlined where it is called.
CREATE OR REPLACE FUNCTION pgeval.reaches(p_value double precision, p_target double precision)
RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT p_value >= p_target - pgeval.reach_tolerance()
$$;
