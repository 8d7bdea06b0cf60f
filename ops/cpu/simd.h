// The CPU kernels' vector toolkit: UOE_SIMD (one function compiled per ISA, core/simd.h) and the vm:: math.
#pragma once

#include "core/simd.h"
#include "vec_math.h"
