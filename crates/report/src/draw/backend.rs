//! One drawing backend for both kinds of figure file: [`FigureBackend`] is plotters'
//! bitmap backend (for PNG) or its SVG backend, chosen when a figure is rendered, so that
//! every figure function draws once, on one type of area, into either.

use std::error::Error;
use std::fmt;

use plotters::prelude::*;
use plotters_backend::{
    BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingErrorKind,
};

/// The bitmap or the SVG backend.
pub enum FigureBackend<'a> {
    /// Pixels, encoded as PNG by the caller.
    Bitmap(BitMapBackend<'a>),
    /// Vector shapes and text, as an SVG document.
    Svg(SVGBackend<'a>),
}

/// Either backend's error.
#[derive(Debug)]
pub struct FigureBackendError(Box<dyn Error + Send + Sync>);

impl fmt::Display for FigureBackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl Error for FigureBackendError {}

type Drawn = Result<(), DrawingErrorKind<FigureBackendError>>;

/// A backend's error as [`FigureBackendError`].
fn lift<T, E: Error + Send + Sync + 'static>(
    result: Result<T, DrawingErrorKind<E>>,
) -> Result<T, DrawingErrorKind<FigureBackendError>> {
    result.map_err(|error| match error {
        DrawingErrorKind::DrawingError(e) => {
            DrawingErrorKind::DrawingError(FigureBackendError(Box::new(e)))
        }
        DrawingErrorKind::FontError(e) => DrawingErrorKind::FontError(e),
    })
}

/// Runs `$call` on whichever backend `$self` holds, with its error lifted.
macro_rules! either {
    ($self:expr, $backend:ident => $call:expr) => {
        match $self {
            FigureBackend::Bitmap($backend) => lift($call),
            FigureBackend::Svg($backend) => lift($call),
        }
    };
}

impl DrawingBackend for FigureBackend<'_> {
    type ErrorType = FigureBackendError;

    fn get_size(&self) -> (u32, u32) {
        match self {
            FigureBackend::Bitmap(b) => b.get_size(),
            FigureBackend::Svg(b) => b.get_size(),
        }
    }

    fn ensure_prepared(&mut self) -> Drawn {
        either!(self, b => b.ensure_prepared())
    }

    fn present(&mut self) -> Drawn {
        either!(self, b => b.present())
    }

    fn draw_pixel(&mut self, point: BackendCoord, color: BackendColor) -> Drawn {
        either!(self, b => b.draw_pixel(point, color))
    }

    fn draw_line<S: BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> Drawn {
        either!(self, b => b.draw_line(from, to, style))
    }

    fn draw_rect<S: BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Drawn {
        either!(self, b => b.draw_rect(upper_left, bottom_right, style, fill))
    }

    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Drawn {
        either!(self, b => b.draw_path(path, style))
    }

    fn draw_circle<S: BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> Drawn {
        either!(self, b => b.draw_circle(center, radius, style, fill))
    }

    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        style: &S,
    ) -> Drawn {
        either!(self, b => b.fill_polygon(vert, style))
    }

    fn draw_text<TStyle: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &TStyle,
        pos: BackendCoord,
    ) -> Drawn {
        either!(self, b => b.draw_text(text, style, pos))
    }

    fn estimate_text_size<TStyle: BackendTextStyle>(
        &self,
        text: &str,
        style: &TStyle,
    ) -> Result<(u32, u32), DrawingErrorKind<FigureBackendError>> {
        either!(self, b => b.estimate_text_size(text, style))
    }

    fn blit_bitmap(&mut self, pos: BackendCoord, size: (u32, u32), src: &[u8]) -> Drawn {
        either!(self, b => b.blit_bitmap(pos, size, src))
    }
}
