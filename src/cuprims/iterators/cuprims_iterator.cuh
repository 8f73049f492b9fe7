// cuprims iterators as CUB sees them: random-access iterators over a generated state.
//
// Each cuprims iterator kind is generated as a small state struct S (see
// cuprims/iterators/units.py): `V operator[](long long i) const` reads item i, and
// output kinds also have `void write(long long i, const V& v) const`. The templates here
// add a position and the iterator interface CUB's agents use (`*it`, `it[i]`, `it + n`,
// `it - it`, the iterator traits), so a state struct can be passed wherever CUB takes an
// input or output iterator. The host packs {state, position 0} at each launch; the layout
// is pinned by static_asserts in the generated code.
#pragma once

#include <cuda/std/cstring>
#include <cuda/std/iterator>
#include <cuda/std/type_traits>

namespace cuprims
{

// A value of the state's own type as the type the algorithm reads (V): the same, a
// struct of the same layout under other field names (copied bytewise), or a conversion.
template <class To, class From>
__host__ __device__ __forceinline__ To convert_value(const From& v)
{
  if constexpr (::cuda::std::is_same_v<To, From>)
  {
    return v;
  }
  else if constexpr (::cuda::std::is_class_v<To> && ::cuda::std::is_class_v<From> && sizeof(To) == sizeof(From))
  {
    To r;
    ::cuda::std::memcpy(&r, &v, sizeof(To));
    return r;
  }
  else
  {
    return static_cast<To>(v);
  }
}

template <class S, class V>
struct input_iterator
{
  using value_type        = V;
  using reference         = V;
  using pointer           = void;
  using difference_type   = long long;
  using iterator_category = ::cuda::std::random_access_iterator_tag;

  S state;
  long long position;

  __host__ __device__ __forceinline__ V operator*() const
  {
    return convert_value<V>(state[position]);
  }
  __host__ __device__ __forceinline__ V operator[](difference_type i) const
  {
    return convert_value<V>(state[position + i]);
  }
  __host__ __device__ __forceinline__ input_iterator operator+(difference_type n) const
  {
    return {state, position + n};
  }
  __host__ __device__ __forceinline__ input_iterator operator-(difference_type n) const
  {
    return {state, position - n};
  }
  __host__ __device__ __forceinline__ difference_type operator-(const input_iterator& other) const
  {
    return position - other.position;
  }
  __host__ __device__ __forceinline__ input_iterator& operator+=(difference_type n)
  {
    position += n;
    return *this;
  }
  __host__ __device__ __forceinline__ input_iterator& operator-=(difference_type n)
  {
    position -= n;
    return *this;
  }
  __host__ __device__ __forceinline__ input_iterator& operator++()
  {
    ++position;
    return *this;
  }
  __host__ __device__ __forceinline__ input_iterator operator++(int)
  {
    input_iterator before = *this;
    ++position;
    return before;
  }
  __host__ __device__ __forceinline__ input_iterator& operator--()
  {
    --position;
    return *this;
  }
  __host__ __device__ __forceinline__ bool operator==(const input_iterator& other) const
  {
    return position == other.position;
  }
  __host__ __device__ __forceinline__ bool operator!=(const input_iterator& other) const
  {
    return position != other.position;
  }
  __host__ __device__ __forceinline__ bool operator<(const input_iterator& other) const
  {
    return position < other.position;
  }
};

template <class S, class V>
__host__ __device__ __forceinline__ input_iterator<S, V>
operator+(long long n, const input_iterator<S, V>& it)
{
  return it + n;
}

// What `*it = v` and `it[i] = v` assign through: the state's write().
template <class S, class V>
struct output_reference
{
  const S* state;
  long long position;

  template <class T>
  __host__ __device__ __forceinline__ const output_reference& operator=(const T& v) const
  {
    state->write(position, static_cast<V>(v));
    return *this;
  }
};

template <class S, class V>
struct output_iterator
{
  using value_type        = V;
  using reference         = output_reference<S, V>;
  using pointer           = void;
  using difference_type   = long long;
  using iterator_category = ::cuda::std::random_access_iterator_tag;

  S state;
  long long position;

  __host__ __device__ __forceinline__ reference operator*() const
  {
    return {&state, position};
  }
  __host__ __device__ __forceinline__ reference operator[](difference_type i) const
  {
    return {&state, position + i};
  }
  __host__ __device__ __forceinline__ output_iterator operator+(difference_type n) const
  {
    return {state, position + n};
  }
  __host__ __device__ __forceinline__ output_iterator operator-(difference_type n) const
  {
    return {state, position - n};
  }
  __host__ __device__ __forceinline__ difference_type operator-(const output_iterator& other) const
  {
    return position - other.position;
  }
  __host__ __device__ __forceinline__ output_iterator& operator+=(difference_type n)
  {
    position += n;
    return *this;
  }
  __host__ __device__ __forceinline__ output_iterator& operator++()
  {
    ++position;
    return *this;
  }
  __host__ __device__ __forceinline__ output_iterator operator++(int)
  {
    output_iterator before = *this;
    ++position;
    return before;
  }
  __host__ __device__ __forceinline__ bool operator==(const output_iterator& other) const
  {
    return position == other.position;
  }
  __host__ __device__ __forceinline__ bool operator!=(const output_iterator& other) const
  {
    return position != other.position;
  }
};

// What a store through converting_output assigns through: the value converted to To as
// static_cast converts it (an explicit constructor, such as complex<float>'s from
// complex<double>, included).
template <class To>
struct converting_reference
{
  To* slot;

  template <class T>
  __host__ __device__ __forceinline__ const converting_reference& operator=(const T& v) const
  {
    *slot = static_cast<To>(v);
    return *this;
  }
};

// A device array of To that an algorithm writes items of another type into (int64 items
// selected into an int32 array). It is laid out as the pointer it holds, so the kernel
// parameter is the array's address, as for an array of the items' own type.
template <class To>
struct converting_output
{
  using value_type        = To;
  using reference         = converting_reference<To>;
  using pointer           = void;
  using difference_type   = long long;
  using iterator_category = ::cuda::std::random_access_iterator_tag;

  To* ptr;

  __host__ __device__ __forceinline__ reference operator*() const
  {
    return {ptr};
  }
  __host__ __device__ __forceinline__ reference operator[](difference_type i) const
  {
    return {ptr + i};
  }
  __host__ __device__ __forceinline__ converting_output operator+(difference_type n) const
  {
    return {ptr + n};
  }
  __host__ __device__ __forceinline__ converting_output operator-(difference_type n) const
  {
    return {ptr - n};
  }
  __host__ __device__ __forceinline__ difference_type operator-(const converting_output& other) const
  {
    return ptr - other.ptr;
  }
  __host__ __device__ __forceinline__ converting_output& operator+=(difference_type n)
  {
    ptr += n;
    return *this;
  }
  __host__ __device__ __forceinline__ converting_output& operator++()
  {
    ++ptr;
    return *this;
  }
  __host__ __device__ __forceinline__ converting_output operator++(int)
  {
    converting_output before = *this;
    ++ptr;
    return before;
  }
  __host__ __device__ __forceinline__ bool operator==(const converting_output& other) const
  {
    return ptr == other.ptr;
  }
  __host__ __device__ __forceinline__ bool operator!=(const converting_output& other) const
  {
    return ptr != other.ptr;
  }
};

} // namespace cuprims
