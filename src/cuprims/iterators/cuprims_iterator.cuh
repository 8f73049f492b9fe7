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

} // namespace cuprims
