"""Writes tests/index/fixtures (kept in git; rerun to regenerate)."""

from pathlib import Path

FILES = {
    # ---------------------------------------------------------------- python
    "python/pkg/__init__.py": '"""The pkg package: engines and helpers."""\nfrom .core import Engine\n',
    "python/pkg/core.py": '''"""Core engine of the demo package."""

import os
from . import util
from .util import helper as h, Helper

MAX_SPEED = 10
default_name = "engine"


class Engine(util.Base):
    """Runs things."""

    wheels = 4

    def start(self, speed: int = MAX_SPEED) -> bool:
        """Start the engine.

        More text.
        """
        def inner():
            return 1
        return h(speed) > 0


@decorator
def build(name):
    return Engine()
''',
    "python/pkg/util.py": '''# Small helpers used by the core.
class Base:
    pass


class Helper:
    pass


def helper(x):
    """Double x."""
    return x * 2
''',
    "python/pkg/sub/__init__.py": "",
    "python/pkg/sub/deep.py": "from ..core import Engine\nfrom .. import util\n\n\ndef use():\n    return Engine\n",
    "python/app.py": "import pkg.core\nfrom pkg.util import helper\nfrom pkg import sub\nimport missing_mod\n\nhelper(2)\n",
    # ---------------------------------------------------------------- javascript
    "javascript/src/index.js": '''import { add, PI } from './math';
import * as lib from './lib';
const fmt = require('./util/format.js');

/** Entry point of the demo app. */
export function main() {
  return add(1, PI);
}

export const run = () => main();
''',
    "javascript/src/math.js": '''// Math helpers for the demo.

/**
 * Adds two numbers.
 */
export function add(a, b) {
  return a + b;
}

export const PI = 3.14;

export class Calc {
  // Multiplies.
  mul(a, b) { return a * b; }
}
''',
    "javascript/src/lib/index.js": "export function libFn() {}\n",
    "javascript/src/util/format.js": "module.exports.format = function (x) { return String(x); };\n",
    # ---------------------------------------------------------------- typescript
    "typescript/src/main.ts": '''import { Shape, Color } from "./shapes";
import { api } from "./api";
import { Button } from "./components/Button.js";

export function area(s: Shape): number {
  return s.width * api.scale;
}
''',
    "typescript/src/shapes.ts": '''/** Geometry types. */
export interface Shape {
  width: number;
  describe(): string;
}

export type Size = "s" | "m";

export enum Color { Red, Green }

export abstract class Base {
  abstract draw(): void;
  public name = "x";
  render(): string { return this.name; }
}

export namespace Geo {
  export function origin(): number { return 0; }
}

export const DEFAULT_SIZE: Size = "m";
''',
    "typescript/src/api/index.ts": "export const api = { scale: 2 };\n",
    "typescript/src/components/Button.tsx": '''import React from "react";

interface Props { label: string }

/** A button. */
export function Button(props: Props) {
  return <button>{props.label}</button>;
}

export const Small = (p: Props) => <Button {...p} />;
''',
    # ---------------------------------------------------------------- go
    "go/go.mod": "module example.com/demo\n\ngo 1.22\n",
    "go/main.go": '''// Command demo prints geometry.
package main

import (
	"fmt"

	"example.com/demo/geom"
)

func main() {
	fmt.Println(geom.New(1, 2).Dist())
}
''',
    "go/geom/geom.go": '''// Package geom has points.
package geom

const Pi = 3.14

var Origin = Point{}

// Point is a 2D point.
type Point struct{ X, Y float64 }

// Shape is anything with an area.
type Shape interface{ Area() float64 }

type Meters = float64

// New makes a point.
func New(x, y float64) *Point { return &Point{x, y} }

// Dist is the distance to the origin.
func (p *Point) Dist() float64 { return p.X + p.Y }
''',
    "go/geom/geom_test.go": "package geom\n\nfunc helperForTest() {}\n",
    # ---------------------------------------------------------------- rust
    "rust/Cargo.toml": '[package]\nname = "demo"\nversion = "0.1.0"\n',
    "rust/src/lib.rs": '''//! Demo crate.
mod shapes;
pub mod util;

use crate::shapes::Circle;
use std::fmt;

pub fn make() -> Circle { Circle::new(1.0) }
''',
    "rust/src/shapes.rs": '''use super::util::helper;
use crate::util::{helper as h2, Thing};

/// A circle.
#[derive(Debug)]
pub struct Circle { r: f64 }

impl Circle {
    /// Makes a circle.
    pub fn new(r: f64) -> Self { Circle { r } }
    pub fn area(&self) -> f64 { helper(self.r) }
}

pub trait Area { fn area(&self) -> f64; }

pub enum Kind { Round, Square }

pub const MAX: u32 = 3;
''',
    "rust/src/util/mod.rs": "pub struct Thing;\n\npub fn helper(x: f64) -> f64 { x * 2.0 }\n",
    # ---------------------------------------------------------------- java
    "java/src/main/java/com/example/App.java": '''package com.example;

import com.example.model.User;
import com.example.model.*;
import java.util.List;

/** The app. */
public class App {
    public static void main(String[] args) {
        new User("a").getName();
    }
}
''',
    "java/src/main/java/com/example/model/User.java": '''package com.example.model;

/** A user of the system. */
public class User {
    static final int MAX_NAME = 30;
    private String name;

    public User(String name) { this.name = name; }

    /** Returns the name. */
    public String getName() { return name; }
}
''',
    "java/src/main/java/com/example/model/Role.java": '''package com.example.model;

public enum Role { ADMIN, USER }

interface Named { String name(); }
''',
    # ---------------------------------------------------------------- c
    "c/main.c": '''#include <stdio.h>
#include "util.h"

int main(void) {
    printf("%d\\n", add(1, 2));
    return 0;
}
''',
    "c/util.h": '''/* Arithmetic helpers. */
#define UTIL_MAX 10
#define SQUARE(x) ((x) * (x))

struct point { int x; int y; };
typedef struct point point_t;
enum color { RED, GREEN };

/* Adds two ints. */
int add(int a, int b);
extern int counter;
''',
    "c/util.c": '''#include "util.h"

int counter = 0;

int add(int a, int b) {
    return a + b;
}

static char *name(void) { return "x"; }
''',
    # ---------------------------------------------------------------- cpp
    "cpp/src/main.cpp": '''#include "shapes.hpp"
#include <vector>

int main() {
    geo::Circle c(1.0);
    return static_cast<int>(c.area());
}
''',
    "cpp/src/shapes.hpp": '''// Shapes for the demo.
#pragma once

namespace geo {

/// A circle.
class Circle {
public:
    explicit Circle(double r);
    double area() const;
private:
    double r_;
};

struct Box { int w; };

using Radius = double;

}  // namespace geo
''',
    "cpp/src/shapes.cpp": '''#include "shapes.hpp"

geo::Circle::Circle(double r) : r_(r) {}

double geo::Circle::area() const { return 3.14 * r_ * r_; }

template <typename T>
T twice(T v) { return v + v; }
''',
}


def main() -> None:
    base = Path(__file__).parent / "fixtures"
    for rel, text in FILES.items():
        path = base / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


if __name__ == "__main__":
    main()
