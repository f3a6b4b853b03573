\set s random(1, :sessions)
\set step random(1, 1000000000)
SELECT agent_memory.wm_set('ls' || :s, 'fetched_context', jsonb_build_object('fares', jsonb_build_array(412, 388), 'step', :step::int));
