// What every kernel file shares, for both APIs (it follows the API's dialect header): the accessor
// every global load and store goes through, and the bounds-checked build (GM_CHECKED = 1).
//
// A kernel addresses global memory as (argument, element index): GM_AT(arg, type, p, i, w) is the
// address of elements [i, i + w) of pointer p (to ``type``), which belongs to kernel argument ``arg`` (each family numbers
// its arguments: reduce.cl GM_A_IN/OUT/PART, elementwise.cl input k = k, the output NIN). Functions
// that touch global memory take GM_CHK_P last and are called with GM_CHK_A last.
//
// Unchecked (GM_CHECKED 0, every production build): GM_AT(...) is p + i, nothing else.
// Checked: every kernel takes one more argument, the status buffer gm_chk (longs, laid out below; the
// host fills the bounds before a launch and reads the status after it:
// gpu_mean/backends/checked.py). GM_AT tests lo <= i and i + w <= hi against the argument's bounds
// (element indices, as the kernel indexes that pointer); a violation records the first one (argument,
// index, width, bounds, work-item) and counts them, and the access goes to a sink inside gm_chk
// instead, so that a checked kernel never reads or writes outside its bindings itself. The checked
// build also reverses the local ids within each work-group: PoCL runs a group's work-items one after
// another in id order, so a missing barrier whose reader reads a lower id passes there unless the
// order is reversed. The warp shuffle is off in a checked build (lanes are logical ids then).

#ifndef GM_CHECKED
#define GM_CHECKED 0
#endif

#if GM_CHECKED
// gm_chk layout, in longs: [0] two ints: the first-violation flag and the violation count;
// [1] argument, [2] index, [3] width, [4] lo, [5] hi, [6] global id 0, [7] global id 1 of the first
// violation; [GM_CHK_SINK, GM_CHK_BOUNDS) the sink; [GM_CHK_BOUNDS + 2a], [GM_CHK_BOUNDS + 2a + 1]
// lo and hi of argument a.
#define GM_CHK_SINK 16
#define GM_CHK_BOUNDS 48
#define GM_CHK_P , __global long* gm_chk
#define GM_CHK_A , gm_chk

// the reversed local ids (global ids follow them; every launch has a zero global offset)
GM_INLINE size_t gm_reversed_local_id(uint d) { return get_local_size(d) - 1 - get_local_id(d); }
GM_INLINE size_t gm_reversed_global_id(uint d) { return get_group_id(d) * get_local_size(d) + gm_reversed_local_id(d); }
#undef get_local_id
#undef get_global_id
#define get_local_id(d) gm_reversed_local_id(d)
#define get_global_id(d) gm_reversed_global_id(d)
#undef GM_WARP_SHUFFLE
#define GM_WARP_SHUFFLE 0

GM_INLINE int gm_in_bounds(__global long* gm_chk, int arg, long i, long w) {
    const long lo = gm_chk[GM_CHK_BOUNDS + 2 * arg], hi = gm_chk[GM_CHK_BOUNDS + 2 * arg + 1];
    if (i >= lo && i <= hi - w) return 1;
    if (atomic_cmpxchg((volatile __global int*)gm_chk, 0, 1) == 0) {
        gm_chk[1] = arg; gm_chk[2] = i; gm_chk[3] = w; gm_chk[4] = lo; gm_chk[5] = hi;
        gm_chk[6] = (long)get_global_id(0); gm_chk[7] = (long)get_global_id(1);
    }
    atomic_inc((volatile __global int*)gm_chk + 1);
    return 0;
}
#define GM_AT(arg, type, p, i, w) \
    (gm_in_bounds(gm_chk, (arg), (long)(i), (long)(w)) ? (p) + (i) : (__global type*)(gm_chk + GM_CHK_SINK))
#else
#define GM_CHK_P
#define GM_CHK_A
#define GM_AT(arg, type, p, i, w) ((p) + (i))
#endif
