
__rk_swapped_${tag}(a, b) if {
	is_object(a)
	is_set(b)
}

__rk_swapped_${tag}(a, b) if {
	is_set(a)
	is_object(b)
}

__rk_deep_${tag}(a, b) if {
	type_name(a) == type_name(b)
	contains(json.marshal([a, b]), "{")
	types := {type_name(v) | walk([a, b], [p, v]); count(p) >= 2} | {type_name(w) | walk([a, b], [_, o]); is_object(o); _ = o[k]; walk(k, [_, w])}
	types["set"]
	types["object"]
}
