
__rk_b_ordered(c) := array.concat(array.concat(sort(o), sort(j)), sort(s)) if {
	o := [v | v := c[_]; not is_set(v); not is_object(v)]
	j := [v | v := c[_]; is_object(v)]
	s := [v | v := c[_]; is_set(v)]
}

__rk_b_last(a) := a[count(a) - 1]

__rk_b_mixing(c) := 0 if {
	not __rk_b_braced(c)
} else := count({1 | __rk_b_meet(c, 1)} | {2 | __rk_b_meet(c, 2)})

__rk_b_meet(c, depth) if {
	t := __rk_b_types(c, depth)
	t["set"]
	t["object"]
}

__rk_b_braced(c) if {
	not is_object(c)
	contains(json.marshal(c), "{")
}

__rk_b_types(c, depth) := {type_name(v) | walk(c, [p, v]); count(p) >= depth} if {
	not regex.match(`"[\[{]`, json.marshal(c))
} else := {type_name(v) | walk(c, [p, v]); count(p) >= depth} | __rk_b_key_types(c)

__rk_b_key_types(c) := {type_name(w) | walk(c, [_, o]); is_object(o); _ = o[k]; walk(k, [_, w])}
