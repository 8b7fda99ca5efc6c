// Element-wise MEAN, ADD, IDENTITY and the one-pass n-ary mean (gm.ext) for OpenCL.
//
// Macros (prepended by gpu_mean/backends/opencl.py):
//   T            storage type of every tensor (half for FLOAT16: storage only, no cl_khr_fp16 needed)
//   VW           lanes of the compute vector (4; 16 for FLOAT16 on CPU devices, where PoCL converts
//                a vload_half16 at the copy kernel's speed and a vload_half4 at ~0.8x of it)
//   CTV, CT      compute vector type (VW lanes) and its scalar
//   LOADV(p)     CTV from VW consecutive elements at p; LOAD1(p) one element as CT
//   STOREV(v,p)  VW elements to p; STORE1(s,p) one element
//   OP           1 MEAN, 2 ADD, 3 IDENTITY, 4 NARY_MEAN
//   NIN          number of inputs; IN_PARAMS the input parameter list; FOREACH_INPUT(X) X(0)..X(NIN-1)
//   NDIM         rank of the coalesced iteration space (generic kernel only)
//   HAS_SCALE_BIAS, ACC_DOUBLE (n-ary float sums in fp64), IS_FLOAT, WIDE_COMPUTE (FLOAT16 in float32)
//   PREFETCH     0 or bytes of software prefetch ahead (CPU devices); PF_LINE elements per 64 bytes
// Vector loads are vloadn/vload_halfn: they need element alignment only, so any binding offset works.
// Contraction is off so that x*scale+bias rounds twice, as the CPU reference does.
#pragma OPENCL FP_CONTRACT OFF
#if ACC_DOUBLE || NEEDS_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif

#if OP == 1
// (a+b)/2: floats round once (fl(a+b)*0.5 is exact scaling except on overflow, where both
// halves are exact); integers sum in 64 bits and C division truncates toward zero.
inline CTV gm_combine(CTV a, CTV b, float scale, float bias) {
#if IS_FLOAT && WIDE_COMPUTE
    return (a + b) * (CT)0.5;   // FLOAT16 in float32: the sum cannot overflow
#elif IS_FLOAT
    // a finite sum is the answer; otherwise halve first (exact for operands that large, and inf or
    // NaN operands give the same inf or NaN). One compare: isinf/isfinite cost PoCL 17 % of bandwidth.
    CTV s = a + b;
    return select(a * (CT)0.5 + b * (CT)0.5, s * (CT)0.5, isless(fabs(s), (CTV)(INFINITY)));
#else
    return (a + b) / (CT)2;
#endif
}
#elif OP == 2
inline CTV gm_combine(CTV a, CTV b, float scale, float bias) { return a + b; }
#elif OP == 3
inline CTV gm_combine(CTV a, CTV b, float scale, float bias) {
#if HAS_SCALE_BIAS
    return a * (CT)scale + (CT)bias;
#else
    return a;
#endif
}
#endif

#if OP == 4
#if IS_FLOAT && ACC_DOUBLE
#define ACCV double4
#define ACC_INIT (double4)(0.0)
#define ACC_ADD(acc, c, x) acc += convert_double4(x)
#define ACC_RESULT(acc, c) ((acc) / (double)NIN)
#elif IS_FLOAT
// no fp64: Neumaier-compensated float sum, one division at the end
#define ACCV float4
#define ACC_INIT (float4)(0.0f)
#define ACC_ADD(acc, c, x) { float4 t_ = acc + (x); \
    c += select((x - t_) + acc, (acc - t_) + (x), isgreaterequal(fabs(acc), fabs(x))); acc = t_; }
#define ACC_RESULT(acc, c) (select((acc) + (c), (acc), isinf(acc)) / (float)NIN)
#else
#define ACCV CTV
#define ACC_INIT (CTV)(0)
#define ACC_ADD(acc, c, x) acc += (x)
#define ACC_RESULT(acc, c) ((acc) / (CT)NIN)
#endif
#define GM_ADD_INPUT(k) ACC_ADD(acc, comp, LOADV_AT(in##k, off##k, k));
#else
#define ACCV CTV
#endif

// One 4-wide result from the inputs at per-input element positions (macro LOADV_AT decides how).
#if OP == 4
#define GM_COMPUTE(res) { ACCV acc = ACC_INIT; ACCV comp = ACC_INIT; FOREACH_INPUT(GM_ADD_INPUT) \
    res = ACC_RESULT(acc, comp); }
#elif NIN == 2
#define GM_COMPUTE(res) res = gm_combine(LOADV_AT(in0, off0, 0), LOADV_AT(in1, off1, 1), scale, bias);
#else
#define GM_COMPUTE(res) res = gm_combine(LOADV_AT(in0, off0, 0), LOADV_AT(in0, off0, 0), scale, bias);
#endif

#if OP == 4
#define RESV ACCV
#else
#define RESV CTV
#endif

#if PREFETCH
// CPU devices: every input PREFETCH bytes ahead of element ``at``, once per 64-byte line of elements
// (PF_LINE elements); the host turns it on where the lines ahead are read next
#define GM_PF_INPUT(k) __builtin_prefetch((__global const char*)(in##k + off##k + GM_PF_POS(k)) + PREFETCH);
#define GM_PREFETCH_INPUTS(at) if (((at) % PF_LINE) == 0) { FOREACH_INPUT(GM_PF_INPUT) }
#else
#define GM_PREFETCH_INPUTS(at)
#endif

// Every operand is one dense run: work-item g owns elements [VW*UNROLL*g, VW*UNROLL*(g+1)).
__kernel void gm_ew_contig(__global T* out, ulong out_off, ulong n, float scale, float bias IN_PARAMS) {
    ulong first = (ulong)get_global_id(0) * VW * UNROLL;
    if (first + VW * UNROLL <= n) {
        for (int u = 0; u < UNROLL; ++u) {
            ulong base = first + VW * u;
#define GM_PF_POS(k) base
            GM_PREFETCH_INPUTS(base)
#undef GM_PF_POS
#define LOADV_AT(p, o, k) LOADV((p) + (o) + base)
            RESV r;
            GM_COMPUTE(r)
            STOREV(r, out + out_off + base);
#undef LOADV_AT
        }
    } else {
        for (ulong i = first; i < n; ++i) {
#define LOADV_AT(p, o, k) ((CTV)(LOAD1((p) + (o) + i)))
            RESV r;
            GM_COMPUTE(r)
            STORE1(r.s0, out + out_off + i);
#undef LOADV_AT
        }
    }
}

// Element offsets of the start of row ``row`` (all dimensions but the innermost) for every operand.
inline void gm_row_positions(__constant long* meta, long row, long* pos) {
    for (int k = 0; k <= NIN; ++k) pos[k] = 0;
    for (int d = NDIM - 2; d >= 0; --d) {
        // the outermost index is what is left: no division for it
        long sz = meta[d], q = d > 0 ? row / sz : 0, idx = row - q * sz;
        row = q;
        for (int k = 0; k <= NIN; ++k) pos[k] += idx * meta[NDIM * (k + 1) + d];
    }
}

// Work-item g's run of up to ``run`` elements along the innermost dimension: fills every operand's
// row start, sets *i0 to the run's first index and returns its end.
inline long gm_run_start(__constant long* meta, long g, long run, long* pos, long* i0) {
    long inner = meta[NDIM - 1];
    long runs_per_row = (inner + run - 1) / run;
    long row = g / runs_per_row;
    gm_row_positions(meta, row, pos);
    *i0 = (g - row * runs_per_row) * run;
    return min(inner, *i0 + run);
}

// General strides: work-item g owns a run of up to RUN elements along the innermost dimension.
// meta: sizes[NDIM], then the strides of each input, then the output's (elements).
__kernel void gm_ew_strided(__global T* out, ulong out_off, ulong n_runs, __constant long* meta,
                            float scale, float bias IN_PARAMS) {
    ulong g = get_global_id(0);
    if (g >= n_runs) return;
    long pos[NIN + 1], i0;
    long iend = gm_run_start(meta, (long)g, RUN, pos, &i0);
    for (long i = i0; i < iend; ++i) {
#define LOADV_AT(p, o, k) ((CTV)(LOAD1((p) + (o) + pos[k] + i * meta[NDIM * ((k) + 1) + NDIM - 1])))
        RESV r;
        GM_COMPUTE(r)
        STORE1(r.s0, out + out_off + pos[NIN] + i * meta[NDIM * (NIN + 1) + NDIM - 1]);
#undef LOADV_AT
    }
}

// Every operand's innermost dimension is dense (broadcast and padded layouts usually are): work-item
// g owns a run of RUN_ROWS elements of one row, moved with 4-wide vector loads.
__kernel void gm_ew_rows(__global T* out, ulong out_off, ulong n_runs, __constant long* meta,
                         float scale, float bias IN_PARAMS) {
    ulong g = get_global_id(0);
    if (g >= n_runs) return;
    long pos[NIN + 1], i0;
    long iend = gm_run_start(meta, (long)g, RUN_ROWS, pos, &i0);
    long i = i0;
    for (; i + VW <= iend; i += VW) {
#define GM_PF_POS(k) (pos[k] + i)
        GM_PREFETCH_INPUTS(i)
#undef GM_PF_POS
#define LOADV_AT(p, o, k) LOADV((p) + (o) + pos[k] + i)
        RESV r;
        GM_COMPUTE(r)
        STOREV(r, out + out_off + pos[NIN] + i);
#undef LOADV_AT
    }
    for (; i < iend; ++i) {
#define LOADV_AT(p, o, k) ((CTV)(LOAD1((p) + (o) + pos[k] + i)))
        RESV r;
        GM_COMPUTE(r)
        STORE1(r.s0, out + out_off + pos[NIN] + i);
#undef LOADV_AT
    }
}
