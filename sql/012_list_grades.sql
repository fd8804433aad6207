-- The judged grade at each position of a ranked list of test set p_testset's query p_query
-- (NULL: not judged; '{}' for an empty list): what pgeval.result_list.grades holds for a stored
-- list (the trigger pgeval.result_fill_grades fills it with this), and what a list that is not
-- stored (pgeval tune's candidates) is measured with.
CREATE OR REPLACE FUNCTION pgeval.list_grades(p_testset bigint, p_query text, p_chunk_ids text[])
RETURNS smallint[] LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT coalesce(array_agg(j.grade ORDER BY u.pos), '{}')
      FROM unnest(p_chunk_ids) WITH ORDINALITY AS u(chunk_id, pos)
      LEFT JOIN pgeval.qrel j
             ON j.testset_id = p_testset AND j.query_id = p_query AND j.chunk_id = u.chunk_id
$$;
